//! Which hosts an agent may reach: the operator's list, as written (`api.anthropic.com`,
//! `*.githubusercontent.com`, `api.github.com:8443`, `10.0.0.5:5432`), and the addresses a name may
//! resolve to.

use std::net::IpAddr;

use apiary_addr::Host;

/// One entry of the host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: Pattern,
    /// `None`: 443 and 80.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// A name, lowercase, without a trailing dot.
    Name(String),
    /// `*.example.com`: any name under it (not the bare name).
    Under(String),
    /// A literal address: the only way to allow a loopback, private or link-local one.
    Addr(IpAddr),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{entry}` is not a host: {why}")]
pub struct RuleError {
    pub entry: String,
    pub why: &'static str,
}

impl HostRule {
    pub fn parse(entry: &str) -> Result<HostRule, RuleError> {
        let fail = |why| RuleError {
            entry: entry.to_string(),
            why,
        };
        let (host, port) = split_port(entry.trim()).ok_or_else(|| fail("a bad port"))?;
        if let Ok(addr) = host.trim_matches(['[', ']']).parse::<IpAddr>() {
            return Ok(HostRule {
                host: Pattern::Addr(addr),
                port,
            });
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        let (under, name) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest.to_string()),
            None => (false, name),
        };
        if !is_dns_name(&name) {
            return Err(fail(
                "a host is a DNS name, `*.` and a name, or an IP address",
            ));
        }
        Ok(HostRule {
            host: if under {
                Pattern::Under(name)
            } else {
                Pattern::Name(name)
            },
            port,
        })
    }

    /// Whether `host:port` (as a client asked for it) is this entry.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 443 || port == 80,
        };
        port_ok
            && match (&self.host, normalise(host)) {
                (Pattern::Addr(a), Some(Host::Addr(b))) => *a == b,
                (Pattern::Name(n), Some(Host::Name(h))) => *n == h,
                (Pattern::Under(n), Some(Host::Name(h))) => {
                    h.len() > n.len() + 1
                        && h.ends_with(n.as_str())
                        && h[..h.len() - n.len()].ends_with('.')
                }
                _ => false,
            }
    }

    /// The literal address this entry names, if it names one.
    pub fn address(&self) -> Option<IpAddr> {
        match self.host {
            Pattern::Addr(a) => Some(a),
            _ => None,
        }
    }
}

/// A host as a client wrote it, read as the resolver would (`127.1`, `2130706433` and `0x7f.1` are
/// 127.0.0.1), so a numeric spelling never passes for a name; `None` for what is neither.
pub fn normalise(host: &str) -> Option<Host> {
    if let Ok(addr) = host.parse::<IpAddr>() {
        return Some(Host::Addr(addr));
    }
    Host::parse(host).ok()
}

/// Addresses an agent reaches only when an entry names them literally: this machine, its
/// networks, link-local (the cloud metadata service among them), shared, multicast and reserved
/// ranges.
pub fn is_internal(addr: IpAddr) -> bool {
    apiary_addr::private(addr).is_some()
}

fn split_port(entry: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (addr, tail) = rest.split_once(']')?;
        return match tail.strip_prefix(':') {
            Some(p) => Some((addr, Some(p.parse().ok()?))),
            None if tail.is_empty() => Some((addr, None)),
            None => None,
        };
    }
    match entry.rsplit_once(':') {
        // More than one colon and no brackets: an IPv6 address without a port.
        Some((host, _)) if host.contains(':') => Some((entry, None)),
        Some((host, port)) => Some((host, Some(port.parse().ok().filter(|p| *p > 0)?))),
        None => Some((entry, None)),
    }
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> HostRule {
        HostRule::parse(s).unwrap()
    }

    #[test]
    fn names_match_whole_labels_and_default_ports() {
        let r = rule("API.Anthropic.com.");
        assert!(r.admits("api.anthropic.com", 443));
        assert!(r.admits("api.anthropic.com.", 80));
        assert!(!r.admits("api.anthropic.com", 22));
        assert!(!r.admits("evilapi.anthropic.com", 443));
        assert!(!r.admits("api.anthropic.com.evil.net", 443));
        let under = rule("*.githubusercontent.com");
        assert!(under.admits("raw.githubusercontent.com", 443));
        assert!(!under.admits("githubusercontent.com", 443));
        assert!(!under.admits("evilgithubusercontent.com", 443));
        assert!(rule("db.internal:5432").admits("db.internal", 5432));
    }

    #[test]
    fn numeric_spellings_are_addresses_not_names() {
        for spelling in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0177.0.0.1",
            "0x7f000001",
        ] {
            assert_eq!(
                normalise(spelling),
                Some(Host::Addr("127.0.0.1".parse().unwrap())),
                "{spelling}"
            );
        }
        assert_eq!(normalise("[::1]"), Some(Host::Addr("::1".parse().unwrap())));
        assert!(matches!(normalise("localhost"), Some(Host::Name(_))));
        assert_eq!(normalise("1.2.3.256"), None);
        // A name rule never admits an address spelled as a number.
        assert!(!rule("localhost").admits("2130706433", 443));
        assert!(rule("127.0.0.1:8080").admits("127.1", 8080));
        assert!(rule("[::1]:8080").admits("::1", 8080));
    }

    #[test]
    fn internal_ranges_are_internal() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(a.parse().unwrap()), "{a}");
        }
        for a in ["1.1.1.1", "160.79.104.10", "2607:6bc0::10"] {
            assert!(!is_internal(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in [
            "",
            "exa mple.com",
            "a..b",
            "host:0",
            "host:99999",
            "*.",
            "-x.com",
        ] {
            assert!(HostRule::parse(bad).is_err(), "{bad}");
        }
    }
}

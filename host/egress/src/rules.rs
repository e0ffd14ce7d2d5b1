//! Which hosts an agent may reach: the operator's list, as written (`api.anthropic.com`,
//! `*.githubusercontent.com`, `api.github.com:8443`, `10.0.0.5:5432`), and the addresses a name may
//! resolve to.

use std::net::IpAddr;

/// One entry of the host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: Host,
    /// `None`: 443 and 80.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
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
                host: Host::Addr(addr),
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
                Host::Under(name)
            } else {
                Host::Name(name)
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
                (Host::Addr(a), Target::Addr(b)) => *a == b,
                (Host::Name(n), Target::Name(h)) => *n == h,
                (Host::Under(n), Target::Name(h)) => {
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
            Host::Addr(a) => Some(a),
            _ => None,
        }
    }
}

/// A host as a client wrote it: a name, or an address in any of the numeric spellings resolvers
/// accept (`127.1`, `2130706433`, `0x7f.0.0.1`), so a spelling never passes for a name.
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    Name(String),
    Addr(IpAddr),
}

pub fn normalise(host: &str) -> Target {
    let host = host.trim_matches(['[', ']']);
    if let Ok(addr) = host.parse::<IpAddr>() {
        return Target::Addr(addr);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    match inet_aton(&name) {
        Some(v4) => Target::Addr(IpAddr::V4(v4.into())),
        None => Target::Name(name),
    }
}

/// The classic `inet_aton` forms: one to four parts, each decimal, octal (`0…`) or hex (`0x…`),
/// the last filling the remaining bytes.
fn inet_aton(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (last, init) = nums.split_last()?;
    let mut value: u64 = 0;
    for (i, n) in init.iter().enumerate() {
        if *n > 255 {
            return None;
        }
        value |= n << (24 - 8 * i);
    }
    let room = 32 - 8 * init.len() as u32;
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    Some((value | last) as u32)
}

fn number(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x").or(p.strip_prefix("0X")) {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() && radix == 16 {
        return Some(0);
    }
    u64::from_str_radix(digits, radix)
        .ok()
        .filter(|n| *n <= u32::MAX as u64)
}

/// Addresses an agent reaches only when an entry names them literally: this machine, its
/// networks, link-local (cloud metadata among them), shared, multicast and reserved ranges.
pub fn is_internal(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => {
            let [b0, b1, ..] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || a.is_multicast()
                || a.is_documentation()
                || b0 == 0
                || (b0 == 100 && (64..128).contains(&b1))
                || b0 >= 240
        }
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => is_internal(IpAddr::V4(v4)),
            None => {
                let s0 = a.segments()[0];
                a.is_loopback()
                    || a.is_unspecified()
                    || a.is_multicast()
                    || (s0 & 0xfe00) == 0xfc00
                    || (s0 & 0xffc0) == 0xfe80
                    || s0 == 0x2001 && a.segments()[1] == 0xdb8
                    || a.segments()[..6] == [0, 0, 0, 0, 0, 0]
            }
        },
    }
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
                Target::Addr("127.0.0.1".parse().unwrap()),
                "{spelling}"
            );
        }
        assert_eq!(normalise("[::1]"), Target::Addr("::1".parse().unwrap()));
        assert!(matches!(normalise("localhost"), Target::Name(_)));
        assert!(matches!(normalise("1.2.3.4.5"), Target::Name(_)));
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

//! Which destinations a call's `http:` grants reach, decided on addresses as well as names: the
//! request's host is normalised before it is matched ([`Host::parse`]), a granted name is resolved
//! here, and an address that is not the public internet is reached only when a grant names that
//! address itself. The addresses that pass are the ones connected to ([`super::pinned`]).

use std::net::{IpAddr, SocketAddr};

use rustls::pki_types::ServerName;

use super::address::{Host, private};
use super::pinned::Target;

/// One `http:HOST[:PORT]` grant; without a port it allows 80 and 443.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    host: Host,
    port: Option<u16>,
}

/// The grants of a call.
#[derive(Debug, Clone, Default)]
pub struct Grants(Vec<Grant>);

/// `HOST[:PORT]` split, IPv6 in brackets (`[::1]:8080`); `None` when the port is not a number.
pub fn split_host_port(value: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if value.starts_with('[') {
        let end = value.find(']')?;
        let (host, rest) = value.split_at(end + 1);
        match rest {
            "" => (host, None),
            _ => (host, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match value.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (value, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host, port))
}

impl Grants {
    /// The grants among `allowed` (`HOST[:PORT]` as [`crate::caps`] wrote them); anything that
    /// does not parse grants nothing.
    pub fn parse(allowed: &[String]) -> Grants {
        let grant = |a: &String| {
            let (host, port) = split_host_port(a)?;
            Some(Grant {
                host: Host::parse(host).ok()?,
                port,
            })
        };
        Grants(allowed.iter().filter_map(grant).collect())
    }

    /// Whether a grant names `host` with `port` (no port in the grant: 80 and 443).
    pub fn allows(&self, host: &Host, port: u16) -> bool {
        self.0.iter().any(|g| {
            g.host == *host
                && match g.port {
                    Some(p) => p == port,
                    None => matches!(port, 80 | 443),
                }
        })
    }

    /// Where a request to the granted `host:port` may connect: an address as it is, a name's
    /// addresses that are public or granted themselves. `Err`: why nothing may be reached.
    pub async fn target(&self, host: &Host, port: u16, tls: bool) -> Result<Target, String> {
        let (addrs, name) = match host {
            Host::Addr(ip) => (vec![SocketAddr::new(*ip, port)], None),
            Host::Name(name) => (self.resolve(name, port).await?, Some(name.as_str())),
        };
        let tls = match (tls, name) {
            (false, _) => None,
            (true, Some(n)) => Some(
                ServerName::try_from(n.to_string())
                    .map_err(|_| format!("`{n}` is not a name TLS can verify"))?,
            ),
            (true, None) => Some(ServerName::from(addrs[0].ip())),
        };
        Ok(Target { addrs, tls })
    }

    /// The addresses of `name` a connection may use; `Err` names the first refused one.
    async fn resolve(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let found = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| format!("cannot resolve {name}: {e}"))?;
        let mut usable = Vec::new();
        let mut refused = None;
        for addr in found {
            // `::ffff:127.0.0.1` is 127.0.0.1, to the grants as to the classification.
            let ip = match addr.ip() {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
                v4 => v4,
            };
            match private(ip) {
                Some(kind) if !self.allows(&Host::Addr(ip), port) => {
                    refused.get_or_insert((ip, kind));
                }
                _ => usable.push(SocketAddr::new(ip, port)),
            }
        }
        if !usable.is_empty() {
            return Ok(usable);
        }
        Err(match refused {
            Some((ip, kind)) => {
                let literal = Host::Addr(ip);
                format!(
                    "{name} resolves to {literal}, {kind}; a grant reaches it only when it names the address (http:{literal}:{port})"
                )
            }
            None => format!("{name} has no address"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> Host {
        Host::parse(h).unwrap()
    }

    #[test]
    fn grants_match_normalised_hosts_and_default_ports() {
        let g = Grants::parse(&[
            "a.example".into(),
            "127.0.0.1:8080".into(),
            "[::1]:9000".into(),
        ]);
        assert!(g.allows(&host("A.Example."), 443));
        assert!(g.allows(&host("a.example"), 80));
        assert!(!g.allows(&host("a.example"), 8443));
        assert!(!g.allows(&host("b.a.example"), 443));
        for same in [
            "127.0.0.1",
            "2130706433",
            "0x7f.1",
            "127.1",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(g.allows(&host(same), 8080), "{same}");
        }
        assert!(!g.allows(&host("127.0.0.1"), 8081));
        assert!(!g.allows(&host("localhost"), 8080));
        assert!(g.allows(&host("[::1]"), 9000));
    }

    #[test]
    fn host_and_port_split() {
        assert_eq!(split_host_port("a:80"), Some(("a", Some(80))));
        assert_eq!(split_host_port("[::1]:80"), Some(("[::1]", Some(80))));
        assert_eq!(split_host_port("[::1]"), Some(("[::1]", None)));
        assert_eq!(split_host_port("[::1]x"), None);
        assert_eq!(split_host_port("a:99999"), None);
    }

    #[tokio::test]
    async fn a_granted_name_that_resolves_to_loopback_is_refused_unless_the_address_is_granted() {
        let name_only = Grants::parse(&["localhost:8080".into()]);
        let e = name_only
            .target(&host("localhost"), 8080, false)
            .await
            .unwrap_err();
        assert!(e.contains("loopback") && e.contains(":8080"), "{e}");
        let both = Grants::parse(&["localhost:8080".into(), "127.0.0.1:8080".into()]);
        let t = both.target(&host("localhost"), 8080, false).await.unwrap();
        assert!(
            t.addrs.iter().all(|a| a.ip().is_loopback()),
            "{:?}",
            t.addrs
        );
    }
}

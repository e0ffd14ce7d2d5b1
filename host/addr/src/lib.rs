//! What an HTTP host names, decided the way the resolver would: `2130706433`, `0x7f.1` and `127.1`
//! are all 127.0.0.1 to `getaddrinfo`, so they are that address here too, before any grant is
//! matched; and which addresses are not the public internet (loopback, private networks, the
//! cloud metadata service, ...), which a grant reaches only when it names them literally.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A request's or a grant's host, normalised: lower case, without a trailing dot, a numeric host
/// as the address it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Addr(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Addr(IpAddr::V4(a)) => write!(f, "{a}"),
            Host::Addr(IpAddr::V6(a)) => write!(f, "[{a}]"),
        }
    }
}

/// A host that is neither a name nor an address (`1.2.3.256`, a zone id, an empty label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHost;

impl Host {
    /// `host` as a URI gives it (IPv6 in brackets), normalised.
    pub fn parse(host: &str) -> Result<Host, BadHost> {
        let lower = host.to_ascii_lowercase();
        if let Some(inner) = lower.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            let v6: Ipv6Addr = inner.parse().map_err(|_| BadHost)?;
            return Ok(Host::Addr(unmapped(v6)));
        }
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        if name.is_empty() || name.split('.').any(str::is_empty) {
            return Err(BadHost);
        }
        match numeric_v4(name) {
            Numeric::Addr(a) => Ok(Host::Addr(IpAddr::V4(a))),
            Numeric::Invalid => Err(BadHost),
            Numeric::Name => Ok(Host::Name(name.to_string())),
        }
    }

    /// Whether this host was written the way it displays: a grant must name an address plainly
    /// (`127.0.0.1`, `[::1]`), so an operator reading it sees which address it is.
    pub fn is_plain(&self, written: &str) -> bool {
        self.to_string() == written.to_ascii_lowercase()
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is the IPv4 address it carries.
fn unmapped(v6: Ipv6Addr) -> IpAddr {
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

enum Numeric {
    Addr(Ipv4Addr),
    /// Looks numeric (the resolver would try it as an address) but is not a valid one.
    Invalid,
    Name,
}

/// The `inet_aton` forms the resolver takes: one to four parts, each decimal, octal (`0` first)
/// or hex (`0x` first), the last filling the bytes that are left. A host whose last label is a
/// number is numeric (as the URL standard has it): a name never ends in one.
fn numeric_v4(host: &str) -> Numeric {
    let parts: Vec<&str> = host.split('.').collect();
    let last_numeric = parts.last().is_some_and(|p| number(p).is_some());
    if !last_numeric {
        return Numeric::Name;
    }
    if parts.len() > 4 {
        return Numeric::Invalid;
    }
    let Some(values) = parts
        .iter()
        .map(|p| number(p))
        .collect::<Option<Vec<u64>>>()
    else {
        return Numeric::Invalid;
    };
    let (head, last) = values.split_at(values.len() - 1);
    let rest_bits = 8 * (4 - head.len() as u32);
    if head.iter().any(|v| *v > 255) || last[0] >= 1u64 << rest_bits {
        return Numeric::Invalid;
    }
    let mut value: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        value |= v << (24 - 8 * i as u32);
    }
    value |= last[0];
    Numeric::Addr(Ipv4Addr::from(value as u32))
}

/// One part of a numeric host: decimal, `0`-prefixed octal or `0x`-prefixed hex.
fn number(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // `0x` alone is zero to the resolver.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 12 {
        // Longer than any 32-bit value in any of these radixes: not an address, and no overflow.
        return Some(u64::MAX);
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Where an address leads, when it is not the public internet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    Loopback,
    Unspecified,
    LinkLocal,
    Metadata,
    Network,
    SharedCgnat,
    Multicast,
    Reserved,
}

impl fmt::Display for Private {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Private::Loopback => "a loopback address",
            Private::Unspecified => "the unspecified address",
            Private::LinkLocal => "a link-local address",
            Private::Metadata => "the cloud metadata service",
            Private::Network => "a private network address",
            Private::SharedCgnat => "a carrier-grade NAT address",
            Private::Multicast => "a multicast address",
            Private::Reserved => "a reserved address",
        })
    }
}

/// `None` for a public address; else what kind of non-public address `ip` is. IPv6 forms that
/// carry an IPv4 address (mapped, NAT64, 6to4) are judged by that address.
pub fn private(ip: IpAddr) -> Option<Private> {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => private_v6(v6),
    }
}

fn private_v4(a: Ipv4Addr) -> Option<Private> {
    let [b0, b1, ..] = a.octets();
    let kind = if a == Ipv4Addr::new(169, 254, 169, 254) {
        Private::Metadata
    } else if a.is_loopback() {
        Private::Loopback
    } else if a.is_unspecified() || b0 == 0 {
        Private::Unspecified
    } else if a.is_link_local() {
        Private::LinkLocal
    } else if a.is_private() {
        Private::Network
    } else if b0 == 100 && (b1 & 0xc0) == 64 {
        Private::SharedCgnat
    } else if a.is_multicast() {
        Private::Multicast
    } else if b0 >= 240
        || a.is_documentation()
        || (b0 == 192 && b1 == 0)
        || (b0 == 198 && (b1 & 0xfe) == 18)
    {
        // 240/4 and broadcast, documentation, IETF protocol assignments, benchmarking.
        Private::Reserved
    } else {
        return None;
    };
    Some(kind)
}

fn private_v6(a: Ipv6Addr) -> Option<Private> {
    let s = a.segments();
    if let Some(v4) = embedded_v4(a) {
        return private_v4(v4);
    }
    let kind = if a == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        Private::Metadata
    } else if a.is_loopback() {
        Private::Loopback
    } else if a.is_unspecified() {
        Private::Unspecified
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Private::LinkLocal
    } else if (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfec0 {
        // Unique local, and the deprecated site-local.
        Private::Network
    } else if a.is_multicast() {
        Private::Multicast
    } else if (s[0] == 0x2001 && s[1] == 0x0db8)
        || s[0] == 0
        || (s[0] == 0x0100 && s[1..4] == [0; 3])
    {
        // Documentation, the rest of ::/16 (IPv4-compatible and friends), discard-only.
        Private::Reserved
    } else {
        return None;
    };
    Some(kind)
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 (2002::/16).
fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(v4(s[1], s[2]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(h: &str) -> IpAddr {
        match Host::parse(h) {
            Ok(Host::Addr(a)) => a,
            other => panic!("{h}: {other:?}"),
        }
    }

    #[test]
    fn numeric_hosts_are_the_address_the_resolver_would_use() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        for h in [
            "127.0.0.1",
            "2130706433",
            "0x7f.1",
            "127.1",
            "0177.0.0.1",
            "0x7F000001",
            "127.0.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "[::FFFF:7f00:1]",
        ] {
            assert_eq!(addr(h), lo, "{h}");
        }
        assert_eq!(addr("[::1]"), IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(addr("0"), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        for bad in [
            "1.2.3.256",
            "1.2.3.4.5",
            "256.1",
            "0x1ffffffff",
            "[fe80::1%25eth0]",
            "a..b",
            "",
            ".",
            "foo.123",
            "99999999999999999999",
        ] {
            assert_eq!(Host::parse(bad), Err(BadHost), "{bad}");
        }
        assert_eq!(
            Host::parse("LocalHost."),
            Ok(Host::Name("localhost".into()))
        );
        assert_eq!(
            Host::parse("123.example"),
            Ok(Host::Name("123.example".into()))
        );
    }

    #[test]
    fn only_plainly_written_addresses_are_plain() {
        for (h, plain) in [
            ("127.0.0.1", true),
            ("127.1", false),
            ("2130706433", false),
            ("[::1]", true),
            ("[0::1]", false),
            ("[::ffff:127.0.0.1]", false),
            ("Example.com", true),
            ("example.com.", false),
        ] {
            assert_eq!(Host::parse(h).unwrap().is_plain(h), plain, "{h}");
        }
    }

    #[test]
    fn non_public_addresses_are_named() {
        for (h, kind) in [
            ("127.0.0.1", Private::Loopback),
            ("[::1]", Private::Loopback),
            ("0.0.0.0", Private::Unspecified),
            ("[::]", Private::Unspecified),
            ("169.254.169.254", Private::Metadata),
            ("[fd00:ec2::254]", Private::Metadata),
            ("169.254.1.1", Private::LinkLocal),
            ("[fe80::1]", Private::LinkLocal),
            ("10.1.2.3", Private::Network),
            ("172.16.0.1", Private::Network),
            ("192.168.1.1", Private::Network),
            ("[fd12::1]", Private::Network),
            ("100.64.0.1", Private::SharedCgnat),
            ("224.0.0.1", Private::Multicast),
            ("[ff02::1]", Private::Multicast),
            ("255.255.255.255", Private::Reserved),
            ("[64:ff9b::7f00:1]", Private::Loopback),
            ("[2002:a9fe:a9fe::]", Private::Metadata),
        ] {
            assert_eq!(private(addr(h)), Some(kind), "{h}");
        }
        for h in [
            "93.184.216.34",
            "8.8.8.8",
            "100.128.0.1",
            "[2606:4700::1111]",
        ] {
            assert_eq!(private(addr(h)), None, "{h}");
        }
    }
}

//! Parsers for option values the binaries share: durations, byte counts, `HOST:PORT`
//! addresses and fractions, each with an error that shows a valid example.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// Parses a duration the humantime way: `10s`, `250ms`, `1m30s`, `500us` (`0` is zero). Every
/// binary of the project takes durations like this.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("invalid duration {s:?}: {e} (examples: 10s, 250ms, 1m30s)"))
}

/// Routers for off-link peers: one per family at most.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gateways {
    /// The IPv4 one.
    pub v4: Option<Ipv4Addr>,
    /// The IPv6 one.
    pub v6: Option<Ipv6Addr>,
}

/// Parses `A.B.C.D`, `X:Y::Z` or both, comma-separated, in either order.
pub fn parse_gateways(s: &str) -> Result<Gateways, String> {
    let mut g = Gateways::default();
    for part in s.split(',') {
        match part.trim().parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) if g.v4.is_none() => g.v4 = Some(a),
            Ok(IpAddr::V6(a)) if g.v6.is_none() => g.v6 = Some(a),
            Ok(_) => return Err(format!("{s:?}: one IPv4 and one IPv6 router at most (example: 198.18.0.1,2001:2::1)")),
            Err(_) => return Err(format!("{part:?} is not an IP address (example: 198.18.0.1,2001:2::1)")),
        }
    }
    Ok(g)
}

/// `HOST:PORT` or `[IPV6]:PORT`: a literal address, or a name's first IPv4 address (its
/// first IPv6 one if it has none).
pub fn parse_connect(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("expected HOST:PORT, got {s:?}"));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("expected HOST:PORT with a port 0..65535, got {s:?}"));
    }
    let addrs: Vec<SocketAddr> = s.to_socket_addrs().map_err(|e| format!("cannot resolve {host:?}: {e}"))?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{host:?} has no address"))
}

/// Parses a byte count: `64`, `16k`, `4M` (binary multiples).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1usize << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        _ => (s, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("invalid byte count {s:?} (examples: 64, 16k, 1M)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("byte count {s:?} too large"))
}

/// Parses a fraction in [0, 1]: `0.01` or `1%`.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    let v = num.parse::<f64>().map_err(|_| format!("invalid fraction {s:?} (examples: 0.01, 1%)"))? / scale;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("fraction {s:?} outside 0..1 (0%..100%)"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn gateways() {
        let (g4, g6): (Ipv4Addr, Ipv6Addr) = ("198.18.0.1".parse().unwrap(), "2001:2::1".parse().unwrap());
        assert_eq!(parse_gateways("198.18.0.1"), Ok(Gateways { v4: Some(g4), v6: None }));
        assert_eq!(parse_gateways("2001:2::1,198.18.0.1"), Ok(Gateways { v4: Some(g4), v6: Some(g6) }));
        assert!(parse_gateways("198.18.0.1,198.18.0.2").is_err());
        assert!(parse_gateways("198.18.0.1,").is_err());
        assert!(parse_gateways("router").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1s 500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "s", "-1", "10", "1e400", "nan", "1.2.3", "1e9999s", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn connect_addresses() {
        assert_eq!(parse_connect("198.18.0.1:7000"), Ok(SocketAddr::new(Ipv4Addr::new(198, 18, 0, 1).into(), 7000)));
        assert_eq!(parse_connect("[2001:2::1]:7000"), Ok("[2001:2::1]:7000".parse().unwrap()));
        assert_eq!(parse_connect("localhost:7000").map(|a| a.port()), Ok(7000));
        assert!(parse_connect("localhost:7000").unwrap().ip().is_loopback());
        for bad in ["198.18.0.1", "localhost", ":7000", "localhost:99999", "no-such-host.invalid:1", ""] {
            assert!(parse_connect(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("64"), Ok(64));
        assert_eq!(parse_bytes("16k"), Ok(16384));
        assert_eq!(parse_bytes("1M"), Ok(1 << 20));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("k").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999999999M").is_err());
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("0.01"), Ok(0.01));
        assert_eq!(parse_fraction("1%"), Ok(0.01));
        assert_eq!(parse_fraction(" 100 % "), Ok(1.0));
        assert_eq!(parse_fraction("0"), Ok(0.0));
        for bad in ["", "%", "1.5", "101%", "-0.1", "nan", "one"] {
            assert!(parse_fraction(bad).is_err(), "{bad:?}");
        }
    }
}

//! The agent's egress rule, for everything that reaches out on a user's behalf (fetch_url,
//! remote MCP servers, browser actions): a host is resolved once and only a public address
//! is used; loopback, private, link-local, unspecified, multicast and other special
//! addresses are refused, so the agent can never reach docchat's own ports, PostgreSQL or
//! RabbitMQ, unless an administrator allows that host by name.

use std::net::{IpAddr, SocketAddr};

/// Whether the sandbox's egress rule lets `ip` through.
pub fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // CGNAT
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (18..20).contains(&o[1]))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0x2001 && s[1] == 0xdb8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

/// The first address of `host:port` the rule lets through (any address when `allow` names
/// the host), or why none.
pub async fn resolve(host: &str, port: u16, allow: &[String]) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let allowed = allow.iter().any(|a| a == host);
    addrs
        .iter()
        .copied()
        .find(|a| allowed || public(a.ip()))
        .ok_or_else(|| {
            format!("{host} resolves to a loopback, private or link-local address, which the agent may not reach")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_addresses_are_refused() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!public(bad.parse().unwrap()), "{bad}");
        }
        for good in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(public(good.parse().unwrap()), "{good}");
        }
    }
}

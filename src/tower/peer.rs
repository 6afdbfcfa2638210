//! [`PeerIp`]: the client's address, from the connection or — behind
//! proxies you name — the rightmost address no trusted proxy added to one
//! forwarding header.

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, Request};
use ipnet::IpNet;

use super::extract::KeyExtractor;

/// The header trusted proxies write the client address into (see
/// [`PeerIp::forwarded_by`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`: each proxy appends the
    /// address it received the request from (nginx
    /// `$proxy_add_x_forwarded_for`, cloud load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239): each proxy appends an
    /// element; its `for=` parameter is read (quoted, bracketed IPv6 and
    /// ports allowed; obfuscated identifiers such as `_hidden` or `unknown`
    /// are malformed).
    Forwarded,
    /// `X-Real-IP: client`: one address, set (not appended) by the proxy.
    XRealIp,
}

impl ForwardedHeader {
    fn name(self) -> &'static str {
        match self {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
            ForwardedHeader::XRealIp => "x-real-ip",
        }
    }
}

/// The client's IP address: the connection's peer, or — behind proxies you
/// name — the **rightmost address no trusted proxy added** to one forwarding
/// header. The peer comes from a [`SocketAddr`] or [`IpAddr`] request
/// extension, or axum's [`ConnectInfo`] (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`); with hyper or
/// tonic, insert the accepted connection's address yourself. A request
/// with no peer address has no key: see [`RateLimitLayer::new`](super::RateLimitLayer::new).
///
/// # Forwarding headers, and why the rightmost address
///
/// Forwarding headers are **ignored** by default. Anyone can send
/// `X-Forwarded-For: 1.2.3.4` or `Forwarded: for=5.6.7.8`; proxies *append*
/// to what they receive, so only the entries on the right, added by your
/// own proxies, can be trusted — a limiter keyed by the leftmost entry lets
/// every client pick a fresh key per request and is never limited. Name
/// your proxies instead, and the key is found as nginx's
/// `real_ip_recursive` finds it: walk the chain *header entries, then the
/// peer* from the right, skip every address a trusted proxy added, and key
/// by the first one left. A proxy is trusted if it is one of the nearest
/// [`trusted_hops`](Self::trusted_hops) (the peer is the nearest) or its
/// address is in a [`trusted_network`](Self::trusted_network). If every
/// address is trusted the leftmost is the key; a malformed entry reached on
/// the walk (garbage, bytes that are not text, an obfuscated `Forwarded`
/// identifier) makes the key the peer address, never a client-chosen entry,
/// and nothing left of the first untrusted address is read at all. Only the
/// one header named by [`forwarded_by`](Self::forwarded_by) is read; a
/// client-sent `Forwarded` is ignored behind an `X-Forwarded-For` proxy.
///
/// * **nginx** in front (`proxy_set_header X-Forwarded-For
///   $proxy_add_x_forwarded_for;`): `PeerIp::new().trust_forwarded()` (one
///   trusted hop, `X-Forwarded-For`), or, if the server is also reachable
///   directly, `.trusted_network("10.0.0.0/8".parse()?)` with the proxy's
///   network instead of a hop count.
/// * **A cloud load balancer, then nginx**: two proxies append, so
///   `.trusted_hops(2)`, or the networks of both.
/// * **A proxy that sets `X-Real-IP`**:
///   `.forwarded_by(ForwardedHeader::XRealIp).trusted_hops(1)`.
///
/// [`ConnectInfo`]: https://docs.rs/axum/latest/axum/extract/struct.ConnectInfo.html
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use slidelog::tower::{KeyExtractor, PeerIp};
///
/// // A client behind one proxy (10.0.0.1) spoofs an entry; the proxy
/// // appended the address it saw, 203.0.113.9.
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 4242)));
/// request.headers_mut().insert("x-forwarded-for", "1.2.3.4, 203.0.113.9".parse().unwrap());
/// assert_eq!(PeerIp::new().extract(&request), Some(IpAddr::from([10, 0, 0, 1])));
/// let client = Some(IpAddr::from([203, 0, 113, 9]));
/// assert_eq!(PeerIp::new().trust_forwarded().extract(&request), client);
/// let by_network = PeerIp::new().trusted_network("10.0.0.0/8".parse().unwrap());
/// assert_eq!(by_network.extract(&request), client);
/// ```
///
/// **IPv6.** One client usually holds a whole /64 (and often more) and can
/// rotate through its addresses at will, so keying by the full IPv6 address
/// gives it a fresh limit per request. Key by the prefix instead: the
/// recommended setting is [`ipv6_prefix(64)`](Self::ipv6_prefix) (what a
/// residential or cloud customer is assigned); IPv4 addresses (and
/// IPv4-mapped IPv6 ones) are always keyed whole. The default keeps the full
/// address (128).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerIp {
    header: ForwardedHeader,
    hops: u8,
    /// The trusted networks: the first `len` (inline, so `PeerIp` stays
    /// `Copy` and a check allocates nothing).
    networks: [IpNet; MAX_TRUSTED_NETWORKS],
    len: u8,
    ipv6_prefix: u8,
}

/// The most trusted networks one [`PeerIp`] holds.
pub const MAX_TRUSTED_NETWORKS: usize = 16;

impl Default for PeerIp {
    fn default() -> Self {
        PeerIp {
            header: ForwardedHeader::XForwardedFor,
            hops: 0,
            networks: [IpNet::default(); MAX_TRUSTED_NETWORKS],
            len: 0,
            ipv6_prefix: 128,
        }
    }
}

impl PeerIp {
    /// The connection's peer address; forwarding headers ignored.
    ///
    /// ```
    /// let _ = slidelog::tower::PeerIp::new();
    /// ```
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// Behind one reverse proxy that appends to `X-Forwarded-For`: the same
    /// as `.forwarded_by(ForwardedHeader::XForwardedFor).trusted_hops(1)`.
    /// The key is the rightmost entry of `X-Forwarded-For` (the address
    /// the proxy received the request from), never one the client wrote.
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use slidelog::tower::{KeyExtractor, PeerIp};
    /// let mut request = http::Request::new(());
    /// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 4242)));
    /// request.headers_mut().insert("x-forwarded-for", "6.6.6.6, 1.2.3.4".parse().unwrap());
    /// let key = PeerIp::new().trust_forwarded().extract(&request);
    /// assert_eq!(key, Some(IpAddr::from([1, 2, 3, 4])));
    /// ```
    pub fn trust_forwarded(self) -> Self {
        self.forwarded_by(ForwardedHeader::XForwardedFor)
            .trusted_hops(1)
    }

    /// The one header your trusted proxies write (default
    /// `X-Forwarded-For`); the others are never read.
    ///
    /// ```
    /// use slidelog::tower::{ForwardedHeader, PeerIp};
    /// let _ = PeerIp::new().forwarded_by(ForwardedHeader::Forwarded).trusted_hops(1);
    /// ```
    pub fn forwarded_by(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// How many proxies in front of the server are trusted, counting the
    /// connection's peer as the nearest: `hops` addresses from the right of
    /// the chain (header entries, then the peer) are skipped. 0 (the
    /// default, with no trusted network) ignores forwarding headers.
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use slidelog::tower::{KeyExtractor, PeerIp};
    /// let mut request = http::Request::new(());
    /// request.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 2], 4242)));
    /// // spoofed, client (added by the load balancer), load balancer (added by nginx)
    /// request.headers_mut().insert("x-forwarded-for", "9.9.9.9, 1.2.3.4, 10.0.0.1".parse().unwrap());
    /// let key = PeerIp::new().trusted_hops(2).extract(&request);
    /// assert_eq!(key, Some(IpAddr::from([1, 2, 3, 4])));
    /// ```
    pub fn trusted_hops(mut self, hops: u8) -> Self {
        self.hops = hops;
        self
    }

    /// Trusts every proxy whose address lies in `network` (for example
    /// `"10.0.0.0/8".parse()?`), wherever it stands in the chain. Unlike a
    /// hop count, this stays right when a request reaches the server
    /// without passing every proxy. An IPv4 address lies in a network
    /// written in either form (`10.0.0.0/8` or IPv4-mapped
    /// `::ffff:10.0.0.0/104`), from an IPv4 socket or a dual-stack one.
    ///
    /// # Panics
    ///
    /// With more than [`MAX_TRUSTED_NETWORKS`] networks (merge adjacent
    /// ones, e.g. with `ipnet::IpNet::aggregate`).
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use slidelog::tower::{KeyExtractor, PeerIp};
    /// let peer_ip = PeerIp::new()
    ///     .trusted_network("10.0.0.0/8".parse().unwrap())
    ///     .trusted_network("fd00::/8".parse().unwrap());
    /// let mut request = http::Request::new(());
    /// request.extensions_mut().insert(SocketAddr::from(([10, 1, 2, 3], 4242)));
    /// request.headers_mut().insert("x-forwarded-for", "1.2.3.4, 10.9.9.9".parse().unwrap());
    /// assert_eq!(peer_ip.extract(&request), Some(IpAddr::from([1, 2, 3, 4])));
    /// // A client that connects directly is keyed by its own address.
    /// request.extensions_mut().insert(SocketAddr::from(([5, 5, 5, 5], 4242)));
    /// assert_eq!(peer_ip.extract(&request), Some(IpAddr::from([5, 5, 5, 5])));
    /// ```
    pub fn trusted_network(mut self, network: IpNet) -> Self {
        let len = usize::from(self.len);
        assert!(
            len < MAX_TRUSTED_NETWORKS,
            "PeerIp trusts at most {MAX_TRUSTED_NETWORKS} networks: aggregate them"
        );
        self.networks[len] = network;
        self.len += 1;
        self
    }

    /// Keys IPv6 clients by their first `bits` bits (at most 128; larger
    /// values mean 128): every address of one /`bits` network shares a
    /// limit. Recommended: 64. IPv4 is unaffected.
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use slidelog::tower::{KeyExtractor, PeerIp};
    /// let mut request = http::Request::new(());
    /// let client: IpAddr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
    /// request.extensions_mut().insert(SocketAddr::new(client, 443));
    /// let network: IpAddr = "2001:db8:1:2::".parse().unwrap();
    /// assert_eq!(PeerIp::new().ipv6_prefix(64).extract(&request), Some(network));
    /// assert_eq!(PeerIp::new().extract(&request), Some(client));
    /// ```
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = bits.min(128);
        self
    }

    /// `ip` as a key: IPv6 masked to the prefix, IPv4 (also IPv4-mapped)
    /// whole.
    fn key(&self, ip: IpAddr) -> IpAddr {
        match ip.to_canonical() {
            IpAddr::V6(v6) if self.ipv6_prefix < 128 => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.ipv6_prefix))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
            other => other,
        }
    }

    /// Whether the address `from_right` places from the right of the chain
    /// (0: the peer) was added by a trusted proxy.
    ///
    /// An IPv4 address is looked up in both of its forms, so that a
    /// network written either way (`10.0.0.0/8`, `::ffff:10.0.0.0/104`)
    /// holds it whether it arrived from an IPv4 or a dual-stack socket.
    fn trusted(&self, from_right: usize, ip: IpAddr) -> bool {
        if from_right < usize::from(self.hops) {
            return true;
        }
        let networks = &self.networks[..usize::from(self.len)];
        if networks.is_empty() {
            return false;
        }
        let ip = ip.to_canonical();
        let mapped = match ip {
            IpAddr::V4(v4) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
            IpAddr::V6(_) => None,
        };
        networks
            .iter()
            .any(|network| network.contains(&ip) || mapped.is_some_and(|m| network.contains(&m)))
    }

    /// The client's address, before masking: the rightmost untrusted
    /// address of the chain.
    fn client(&self, headers: &HeaderMap, peer: IpAddr) -> IpAddr {
        if !self.trusted(0, peer) {
            return peer;
        }
        let mut leftmost = peer;
        // The header's lines from the last, each one's entries from the right.
        let mut from_right = 1;
        for line in headers.get_all(self.header.name()).iter().rev() {
            for entry in forwarded_entries(self.header, line.as_bytes()) {
                let Some(ip) = entry else {
                    return peer;
                };
                if !self.trusted(from_right, ip) {
                    return ip;
                }
                leftmost = ip;
                from_right += 1;
            }
        }
        leftmost
    }
}

/// The addresses of one header line, from the right (`None`: malformed).
///
/// Split as bytes, and each entry read as text on its own: a line may
/// carry bytes that are not text (HTTP allows obs-text in a field value,
/// and proxies pass a client's bytes on), and only an entry the walk
/// reaches may decide anything — bytes a client put left of its own
/// address must not (test `a_client_cannot_choose_its_key`).
fn forwarded_entries(
    header: ForwardedHeader,
    line: &[u8],
) -> impl Iterator<Item = Option<IpAddr>> + '_ {
    // `X-Real-IP` holds one address: the whole line is one entry.
    let most = if header == ForwardedHeader::XRealIp {
        1
    } else {
        usize::MAX
    };
    line.rsplitn(most, |&b| b == b',').map(move |entry| {
        let entry = std::str::from_utf8(entry).ok()?;
        match header {
            ForwardedHeader::Forwarded => forwarded_for(entry),
            _ => parse_node(entry.trim()),
        }
    })
}

/// The `for=` node of one `Forwarded` element (`for=1.2.3.4;proto=https`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| parse_node(value.trim().trim_matches('"')))?
    })
}

impl<B> KeyExtractor<B> for PeerIp {
    type Key = IpAddr;

    fn missing_key_hint(&self) -> &'static str {
        "PeerIp needs the peer address: serve axum with \
         `into_make_service_with_connect_info::<SocketAddr>()`, or insert a `SocketAddr` \
         request extension (hyper, tonic); or set `RateLimitLayer::fallback_key` to share one \
         limit among requests without a key."
    }

    fn extract(&self, request: &Request<B>) -> Option<IpAddr> {
        let ext = request.extensions();
        let peer = ext
            .get::<SocketAddr>()
            .map(SocketAddr::ip)
            .or_else(|| ext.get::<IpAddr>().copied())
            .or_else(|| {
                ext.get::<axum::extract::ConnectInfo<SocketAddr>>()
                    .map(|info| info.0.ip())
            })?;
        Some(self.key(self.client(request.headers(), peer)))
    }
}

/// `1.2.3.4`, `1.2.3.4:80`, `[::1]`, `[::1]:80` or `::1`.
pub(super) fn parse_node(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    let (inside, rest) = text.strip_prefix('[')?.split_once(']')?;
    // Nothing but a port may follow the brackets.
    if !(rest.is_empty()
        || rest
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok()))
    {
        return None;
    }
    inside.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderName;

    fn request(peer: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut request = Request::new(());
        request
            .extensions_mut()
            .insert(SocketAddr::new(peer.parse().unwrap(), 4242));
        for &(name, value) in headers {
            request.headers_mut().append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        request
    }

    fn key(peer_ip: &PeerIp, peer: &str, headers: &[(&str, &str)]) -> String {
        peer_ip
            .extract(&request(peer, headers))
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_rightmost_untrusted_address_is_the_key() {
        let xff = [("x-forwarded-for", "9.9.9.9, 1.1.1.1, 10.0.0.1")];
        let peer = "10.0.0.2";
        assert_eq!(key(&PeerIp::new(), peer, &xff), "10.0.0.2");
        assert_eq!(
            key(&PeerIp::new().trust_forwarded(), peer, &xff),
            "10.0.0.1"
        );
        assert_eq!(key(&PeerIp::new().trusted_hops(2), peer, &xff), "1.1.1.1");
        assert_eq!(key(&PeerIp::new().trusted_hops(3), peer, &xff), "9.9.9.9");
        // Every address trusted: the leftmost.
        assert_eq!(key(&PeerIp::new().trusted_hops(9), peer, &xff), "9.9.9.9");
        let private = PeerIp::new().trusted_network("10.0.0.0/8".parse().unwrap());
        assert_eq!(key(&private, peer, &xff), "1.1.1.1");
        // An untrusted peer: the header is never read.
        assert_eq!(key(&private, "8.8.8.8", &xff), "8.8.8.8");
        // Several lines are one list, in order.
        let lines = [
            ("x-forwarded-for", "9.9.9.9"),
            ("x-forwarded-for", "1.1.1.1, 10.0.0.1"),
        ];
        assert_eq!(key(&private, peer, &lines), "1.1.1.1");
    }

    /// An IPv4 proxy is trusted whichever way its network is written and
    /// its address arrives: `10.0.0.0/8` or IPv4-mapped `::ffff:10.0.0.0/104`,
    /// from an IPv4 socket or a dual-stack one (`::ffff:10.0.0.2`).
    #[test]
    fn ipv4_networks_match_in_either_form() {
        let xff = [("x-forwarded-for", "1.1.1.1, ::ffff:10.0.0.1")];
        for network in ["10.0.0.0/8", "::ffff:10.0.0.0/104"] {
            let trusting = PeerIp::new().trusted_network(network.parse().unwrap());
            for peer in ["10.0.0.2", "::ffff:10.0.0.2"] {
                assert_eq!(
                    key(&trusting, peer, &xff),
                    "1.1.1.1",
                    "{network}, peer {peer}"
                );
            }
            assert_eq!(key(&trusting, "8.8.8.8", &xff), "8.8.8.8", "{network}");
        }
        // A mapped network holds only the mapped addresses.
        let mapped = PeerIp::new().trusted_network("::ffff:10.0.0.0/104".parse().unwrap());
        assert_eq!(key(&mapped, "2001:db8::1", &xff), "2001:db8::1");
    }

    #[test]
    fn only_the_named_header_is_read() {
        let both = [("forwarded", "for=6.6.6.6"), ("x-forwarded-for", "1.1.1.1")];
        assert_eq!(
            key(&PeerIp::new().trust_forwarded(), "10.0.0.1", &both),
            "1.1.1.1"
        );
        let forwarded = PeerIp::new()
            .forwarded_by(ForwardedHeader::Forwarded)
            .trusted_hops(1);
        assert_eq!(key(&forwarded, "10.0.0.1", &both), "6.6.6.6");
        let real = PeerIp::new()
            .forwarded_by(ForwardedHeader::XRealIp)
            .trusted_hops(1);
        assert_eq!(key(&real, "10.0.0.1", &both), "10.0.0.1"); // no X-Real-IP: all trusted
        assert_eq!(
            key(&real, "10.0.0.1", &[("x-real-ip", "7.7.7.7")]),
            "7.7.7.7"
        );
        // X-Real-IP is one address: a list in it is malformed.
        assert_eq!(
            key(&real, "10.0.0.1", &[("x-real-ip", "7.7.7.7, 8.8.8.8")]),
            "10.0.0.1"
        );
    }

    #[test]
    fn forwarded_elements_and_malformed_entries() {
        let forwarded = PeerIp::new()
            .forwarded_by(ForwardedHeader::Forwarded)
            .trusted_hops(2);
        let h = [(
            "forwarded",
            r#"for=6.6.6.6, for="[2001:db8::1]:4711";proto=https, for=10.0.0.1"#,
        )];
        assert_eq!(key(&forwarded, "10.0.0.2", &h), "2001:db8::1");
        // Obfuscated identifiers and garbage are malformed: the peer.
        for bad in [
            "for=_hidden, for=10.0.0.1",
            "for=unknown, for=10.0.0.1",
            "garbage, for=10.0.0.1",
        ] {
            assert_eq!(
                key(&forwarded, "10.0.0.2", &[("forwarded", bad)]),
                "10.0.0.2",
                "{bad}"
            );
        }
        let xff = PeerIp::new().trusted_hops(2);
        for (value, want) in [
            ("[2001:db8::7]:443, 10.0.0.1", "2001:db8::7"),
            ("[2001:db8::7], 10.0.0.1", "2001:db8::7"),
            ("1.2.3.4:80, 10.0.0.1", "1.2.3.4"),
            ("2001:db8::7, 10.0.0.1", "2001:db8::7"),
            ("[2001:db8::7]junk, 10.0.0.1", "10.0.0.2"),
            ("not-an-ip, 10.0.0.1", "10.0.0.2"),
            (", 10.0.0.1", "10.0.0.2"),
        ] {
            assert_eq!(
                key(&xff, "10.0.0.2", &[("x-forwarded-for", value)]),
                want,
                "{value}"
            );
        }
    }

    #[test]
    fn ten_thousand_entries() {
        let mut value = vec!["10.1.2.3"; 10_000].join(", ");
        let private = PeerIp::new().trusted_network("10.0.0.0/8".parse().unwrap());
        // All trusted: the leftmost, after walking every entry.
        assert_eq!(
            key(&private, "10.0.0.1", &[("x-forwarded-for", &value)]),
            "10.1.2.3"
        );
        value.insert_str(0, "5.5.5.5, ");
        assert_eq!(
            key(&private, "10.0.0.1", &[("x-forwarded-for", &value)]),
            "5.5.5.5"
        );
        assert_eq!(
            key(
                &PeerIp::new().trusted_hops(2),
                "10.0.0.1",
                &[("x-forwarded-for", &value)]
            ),
            "10.1.2.3"
        );
    }

    /// One hop of a request's way to the server: who sent it on.
    fn node(header: ForwardedHeader, ip: IpAddr) -> String {
        match (header, ip) {
            (ForwardedHeader::Forwarded, IpAddr::V6(v6)) => format!("for=\"[{v6}]:4711\""),
            (ForwardedHeader::Forwarded, ip) => format!("for={ip};proto=https"),
            (_, ip) => ip.to_string(),
        }
    }

    proptest::proptest! {
        /// **A client cannot choose its key.** Whatever bytes a client
        /// sends in the forwarding header (any lines a proxy would pass on:
        /// garbage, addresses, obs-text, commas, quotes), behind proxies
        /// that each append the address they received the request from —
        /// into the last line, as nginx's `$proxy_add_x_forwarded_for`
        /// does, or as a line of their own — the key is the client's own
        /// address, whether the proxies are trusted by count or by network.
        #[test]
        fn a_client_cannot_choose_its_key(
            sent in proptest::collection::vec(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 0..3),
            client in proptest::prelude::any::<[u8; 16]>(),
            v4 in proptest::prelude::any::<bool>(),
            proxies in proptest::collection::vec(proptest::prelude::any::<[u8; 3]>(), 1..4),
            joined in proptest::prelude::any::<bool>(),
            forwarded in proptest::prelude::any::<bool>(),
        ) {
            let header = if forwarded { ForwardedHeader::Forwarded } else { ForwardedHeader::XForwardedFor };
            // Clients outside 10.0.0.0/8, proxies inside it (an IPv6 client
            // with no zero byte is not an IPv4-mapped 10.x address either).
            let client = if v4 {
                IpAddr::from([client[0] % 9 + 1, client[1], client[2], client[3]])
            } else {
                IpAddr::from(client.map(|b| b | 0x20))
            };
            let proxies: Vec<IpAddr> = proxies.iter().map(|p| IpAddr::from([10, p[0], p[1], p[2]])).collect();
            let mut lines: Vec<Vec<u8>> = sent
                .into_iter()
                .filter(|line| http::HeaderValue::from_bytes(line).is_ok())
                .collect();
            // Proxy `i` received the request from the client (`i = 0`) or
            // from proxy `i - 1`; the server's peer is the last proxy.
            for from in std::iter::once(client).chain(proxies[..proxies.len() - 1].iter().copied()) {
                let entry = node(header, from);
                match lines.last_mut() {
                    Some(last) if joined => last.extend_from_slice(format!(", {entry}").as_bytes()),
                    _ => lines.push(entry.into_bytes()),
                }
            }
            let mut request = Request::new(());
            request.extensions_mut().insert(SocketAddr::new(*proxies.last().unwrap(), 443));
            for line in &lines {
                request.headers_mut().append(header.name(), http::HeaderValue::from_bytes(line).unwrap());
            }
            let hops = u8::try_from(proxies.len()).unwrap();
            let by_count = PeerIp::new().forwarded_by(header).trusted_hops(hops);
            let by_network = PeerIp::new().forwarded_by(header).trusted_network("10.0.0.0/8".parse().unwrap());
            proptest::prop_assert_eq!(by_count.extract(&request), Some(client), "{:?}", request.headers());
            proptest::prop_assert_eq!(by_network.extract(&request), Some(client), "{:?}", request.headers());
        }
    }

    #[test]
    #[should_panic(expected = "at most 16 networks")]
    fn too_many_networks_is_a_clear_panic() {
        let mut peer_ip = PeerIp::new();
        for i in 0..=MAX_TRUSTED_NETWORKS as u8 {
            peer_ip = peer_ip.trusted_network(format!("10.{i}.0.0/16").parse().unwrap());
        }
    }
}

//! The TLS material of a `rediss://` connection (feature `redis-tls`).

use core::fmt;

use ::redis::Client;

/// A builder's TLS material (feature `redis-tls`): kept out of `Debug`.
#[derive(Clone, Default)]
pub(super) struct Tls {
    /// PEM: the CAs trusted instead of the system's roots.
    pub(super) root_cert: Option<Vec<u8>>,
    /// PEM: the client's certificate and its private key.
    pub(super) client: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether the server's certificate may name other hosts.
    pub(super) any_hostname: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("root_cert", &self.root_cert.is_some())
            .field("client_cert", &self.client.is_some())
            .field("any_hostname", &self.any_hostname)
            .finish()
    }
}

impl Tls {
    fn is_set(&self) -> bool {
        self.root_cert.is_some() || self.client.is_some() || self.any_hostname
    }

    fn certificates(&self) -> ::redis::TlsCertificates {
        ::redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| ::redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_cert.clone(),
        }
    }

    /// TLS options are for `rediss://` URLs only: on a `redis://` one
    /// they would be ignored (one node) or turn TLS on unasked (a cluster).
    fn refuse_plain(url: &str) -> Result<(), ::redis::RedisError> {
        // (Schemes are case-insensitive.)
        if url
            .get(..9)
            .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
        {
            Ok(())
        } else {
            Err(::redis::RedisError::from((
                ::redis::ErrorKind::InvalidClientConfig,
                "TLS options given for a URL that is not rediss://",
            )))
        }
    }

    pub(super) fn client(&self, url: &str) -> Result<Client, ::redis::RedisError> {
        if !self.is_set() {
            return Client::open(url);
        }
        Tls::refuse_plain(url)?;
        let client = Client::build_with_tls(url, self.certificates())?;
        if !self.any_hostname {
            return Ok(client);
        }
        let info = client.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        Client::open(info.set_addr(addr))
    }

    pub(super) fn cluster(
        &self,
        builder: ::redis::cluster::ClusterClientBuilder,
        nodes: &[String],
    ) -> Result<::redis::cluster::ClusterClientBuilder, ::redis::RedisError> {
        if !self.is_set() {
            return Ok(builder);
        }
        nodes.iter().try_for_each(|url| Tls::refuse_plain(url))?;
        Ok(builder
            .certs(self.certificates())
            .danger_accept_invalid_hostnames(self.any_hostname))
    }
}

//! TLS for `slidelog serve`: to Redis (`rediss://`, envoyproxy/ratelimit's
//! `REDIS_TLS_*`) and on the gRPC port (`GRPC_SERVER_USE_TLS`,
//! `GRPC_CLIENT_TLS_*`). Files are PEM, checked at start; the gRPC
//! certificate and key are read again every [`CERT_POLL`] and on SIGHUP,
//! and a new pair that fits serves the next handshakes, as upstream reloads
//! them (cert-manager rotates them under a running service).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_stream::{Stream, StreamExt};

use super::RedisTarget;

/// TLS to Redis beyond a `rediss://` URL's defaults (the system's roots,
/// no client certificate): envoyproxy/ratelimit's `REDIS_TLS_CACERT`,
/// `REDIS_TLS_CLIENT_CERT` and `REDIS_TLS_CLIENT_KEY`
/// ([`Settings::redis_tls`](super::Settings::redis_tls)).
///
/// ```
/// use slidelog::serve::RedisTls;
///
/// // No files: a `rediss://` URL's defaults.
/// let tls = RedisTls::default();
/// # drop(tls);
/// ```
#[derive(Clone, Default)]
pub struct RedisTls {
    /// PEM: the CAs trusted instead of the system's roots.
    ca: Option<Vec<u8>>,
    /// PEM: the client's certificate (chain) and private key.
    client: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept a server certificate for other host names
    /// (`REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`).
    any_hostname: bool,
}

impl std::fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca.is_some())
            .field("client", &self.client.is_some())
            .field("any_hostname", &self.any_hostname)
            .finish()
    }
}

impl RedisTls {
    /// Reads `--redis-ca`, `--redis-client-cert` and `--redis-client-key`
    /// for `target`, refusing a file that holds no PEM of its kind and TLS
    /// options for a Redis not reached over TLS (`rediss://`).
    ///
    /// ```
    /// use slidelog::serve::{RedisTarget, RedisTls};
    ///
    /// let plain = RedisTarget::Node("redis://127.0.0.1:6379/".into());
    /// assert!(RedisTls::load(Some(&plain), None, None, false).is_ok());
    /// // TLS options for a Redis reached without TLS are refused.
    /// assert!(RedisTls::load(Some(&plain), None, None, true).is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// A file that cannot be read or holds no PEM of its kind, or TLS
    /// options without a `rediss://` Redis.
    pub fn load(
        target: Option<&RedisTarget>,
        ca: Option<&Path>,
        client: Option<(&Path, &Path)>,
        any_hostname: bool,
    ) -> Result<RedisTls, String> {
        if ca.is_none() && client.is_none() && !any_hostname {
            return Ok(RedisTls::default());
        }
        let urls: &[String] = match target {
            Some(RedisTarget::Node(url)) => std::slice::from_ref(url),
            Some(RedisTarget::Cluster(nodes)) => nodes,
            None => {
                return Err(
                    "--redis-ca, --redis-client-cert and --redis-tls-skip-hostname-verification need --redis or --redis-cluster".into(),
                );
            }
        };
        let tls = |url: &&String| {
            url.get(..9)
                .is_some_and(|s| s.eq_ignore_ascii_case("rediss://"))
        };
        if let Some(url) = urls.iter().find(|url| !tls(url)) {
            let scheme = url
                .split_once("://")
                .map_or(url.as_str(), |(scheme, _)| scheme);
            return Err(format!(
                "--redis-ca, --redis-client-cert and --redis-tls-skip-hostname-verification are for Redis over TLS: a rediss:// URL, not {scheme}://"
            ));
        }
        Ok(RedisTls {
            ca: ca
                .map(|path| read_pem("--redis-ca", path, "CERTIFICATE"))
                .transpose()?,
            client: client
                .map(|(cert, key)| {
                    let cert = read_pem("--redis-client-cert", cert, "CERTIFICATE")?;
                    let key = read_pem("--redis-client-key", key, "PRIVATE KEY")?;
                    // Here, not at each connection attempt: the files are
                    // read once, so no retry would mend them.
                    certified(&cert, &key)
                        .map_err(|e| format!("--redis-client-cert and --redis-client-key: {e}"))?;
                    Ok::<_, String>((cert, key))
                })
                .transpose()?,
            any_hostname,
        })
    }

    pub(super) fn apply(
        &self,
        mut builder: crate::redis::RedisBuilder,
    ) -> crate::redis::RedisBuilder {
        if let Some(ca) = &self.ca {
            builder = builder.tls_root_cert(ca.clone());
        }
        if let Some((cert, key)) = &self.client {
            builder = builder.tls_client_cert(cert.clone(), key.clone());
        }
        if self.any_hostname {
            builder = builder.tls_accept_invalid_hostnames(true);
        }
        builder
    }
}

/// `flag`'s file at `path`, refused unless it holds a PEM block of `kind`
/// (`CERTIFICATE`, or `PRIVATE KEY`: PKCS #8, PKCS #1 or SEC1) that
/// rustls's PEM reader takes.
fn read_pem(flag: &str, path: &Path, kind: &str) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    let has_kind = if kind == "PRIVATE KEY" {
        PrivateKeyDer::from_pem_slice(&pem).is_ok()
    } else {
        CertificateDer::pem_slice_iter(&pem)
            .next()
            .is_some_and(|cert| cert.is_ok())
    };
    if has_kind {
        Ok(pem)
    } else {
        Err(format!(
            "{flag} {}: no PEM {} in it",
            path.display(),
            kind.to_lowercase()
        ))
    }
}

/// TLS on the gRPC port (envoyproxy/ratelimit's `GRPC_SERVER_USE_TLS`):
/// the server's certificate and key, reloaded as they change, and with a
/// client CA, mutual TLS (`GRPC_CLIENT_TLS_CACERT`: a client without a
/// certificate it signed is refused), the certificate naming `client_san`
/// if given (`GRPC_CLIENT_TLS_SAN`).
///
/// ```
/// use std::path::Path;
/// use slidelog::serve::GrpcTls;
///
/// let missing = GrpcTls::load(Path::new("/nonexistent/cert.pem"), Path::new("/nonexistent/key.pem"), None, None);
/// assert!(missing.is_err());
/// ```
#[derive(Clone)]
pub struct GrpcTls {
    certified: Arc<Certified>,
    client_ca: Option<Vec<u8>>,
    pub(super) client_san: Option<ServerName<'static>>,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls")
            .field("cert", &self.certified.cert_path)
            .field("client_ca", &self.client_ca.is_some())
            .field("client_san", &self.client_san)
            .finish_non_exhaustive()
    }
}

/// How often the gRPC certificate and key are read again (SIGHUP reads
/// them at once).
pub(crate) const CERT_POLL: Duration = Duration::from_secs(10);

/// The longest a client may take over its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The certificate and key in force, and the files they came from.
struct Certified {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: ArcSwap<CertifiedKey>,
    /// The files' bytes when last read, and the last refusal told.
    last: Mutex<(Vec<u8>, Vec<u8>, Option<String>)>,
}

impl std::fmt::Debug for Certified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certified")
            .field("cert_path", &self.cert_path)
            .finish_non_exhaustive()
    }
}

impl rustls::server::ResolvesServerCert for Certified {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A certificate chain and its key, refused unless the key is the
/// certificate's.
fn certified(cert: &[u8], key: &[u8]) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the key: {e}"))?;
    // The process's provider (ring: the one this build has).
    let provider = rustls::ServerConfig::builder().crypto_provider().clone();
    CertifiedKey::from_der(chain, key, &provider)
        .map_err(|e| format!("the key and the certificate: {e}"))
}

impl Certified {
    /// Reads the files again; a pair that changed and fits serves the
    /// next handshakes. A refusal is told once, the previous pair staying.
    fn reload(&self) {
        let read = || -> Result<(Vec<u8>, Vec<u8>), String> {
            Ok((
                read_pem("--grpc-tls-cert", &self.cert_path, "CERTIFICATE")?,
                read_pem("--grpc-tls-key", &self.key_path, "PRIVATE KEY")?,
            ))
        };
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let outcome = read().and_then(|(cert, key)| {
            if (&cert, &key) == (&last.0, &last.1) {
                return Ok(None);
            }
            let pair = certified(&cert, &key)
                .map_err(|e| format!("--grpc-tls-cert and --grpc-tls-key: {e}"))?;
            Ok(Some((pair, cert, key)))
        });
        match outcome {
            // The pair in force: a refusal told before is over.
            Ok(None) => last.2 = None,
            Ok(Some((pair, cert, key))) => {
                self.current.store(Arc::new(pair));
                *last = (cert, key, None);
                eprintln!(
                    "slidelog serve: reloaded the gRPC certificate {}",
                    self.cert_path.display()
                );
            }
            Err(e) => {
                if last.2.as_deref() != Some(e.as_str()) {
                    eprintln!(
                        "slidelog serve: gRPC certificate reload refused, the previous stays: {e}"
                    );
                }
                last.2 = Some(e);
            }
        }
    }
}

impl GrpcTls {
    /// Reads `--grpc-tls-cert`, `--grpc-tls-key` and `--grpc-client-ca`
    /// (the key must be the certificate's), and checks `--grpc-client-san`
    /// is a DNS name or an IP address.
    ///
    /// ```
    /// use std::path::Path;
    /// use slidelog::serve::GrpcTls;
    ///
    /// let error = GrpcTls::load(Path::new("/nonexistent.pem"), Path::new("/nonexistent.key"), None, None)
    ///     .unwrap_err();
    /// assert!(error.contains("nonexistent"), "{error}");
    /// ```
    ///
    /// # Errors
    ///
    /// A file that cannot be read or holds no PEM of its kind, a key that
    /// is not the certificate's, a client SAN that is neither a DNS name
    /// nor an IP address.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        client_san: Option<&str>,
    ) -> Result<GrpcTls, String> {
        let (cert_pem, key_pem) = (
            read_pem("--grpc-tls-cert", cert, "CERTIFICATE")?,
            read_pem("--grpc-tls-key", key, "PRIVATE KEY")?,
        );
        let pair = certified(&cert_pem, &key_pem)
            .map_err(|e| format!("--grpc-tls-cert and --grpc-tls-key: {e}"))?;
        Ok(GrpcTls {
            certified: Arc::new(Certified {
                cert_path: cert.to_path_buf(),
                key_path: key.to_path_buf(),
                current: ArcSwap::from_pointee(pair),
                last: Mutex::new((cert_pem, key_pem, None)),
            }),
            client_ca: client_ca
                .map(|path| read_pem("--grpc-client-ca", path, "CERTIFICATE"))
                .transpose()?,
            client_san: client_san
                .map(|name| {
                    ServerName::try_from(name.to_owned()).map_err(|_| {
                        format!("--grpc-client-san {name:?}: not a DNS name or an IP address")
                    })
                })
                .transpose()?,
        })
    }

    /// Whether clients must present a certificate.
    pub(super) fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// The acceptor of every connection: HTTP/2 by ALPN, the certificate
    /// in force at its handshake, and the client CA's verifier.
    pub(super) fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        let builder = rustls::ServerConfig::builder();
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(ca) {
                    let cert = cert.map_err(|e| format!("--grpc-client-ca: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("--grpc-client-ca: {e}"))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
                    .build()
                    .map_err(|e| format!("--grpc-client-ca: {e}"))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let resolver: Arc<Certified> = Arc::clone(&self.certified);
        let mut config = builder.with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }

    /// Reads the certificate and key again every [`CERT_POLL`] and on
    /// SIGHUP, for as long as the service runs.
    pub(super) fn reload_as_they_change(&self) {
        let certified = Arc::clone(&self.certified);
        tokio::spawn(async move {
            let mut ticks =
                tokio::time::interval_at(tokio::time::Instant::now() + CERT_POLL, CERT_POLL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            #[cfg(unix)]
            let mut hup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                #[cfg(unix)]
                let hangup = async {
                    match hup.as_mut() {
                        Some(hup) => drop(hup.recv().await),
                        None => std::future::pending().await,
                    }
                };
                #[cfg(not(unix))]
                let hangup = std::future::pending::<()>();
                tokio::select! {
                    _ = ticks.tick() => {}
                    () = hangup => {}
                }
                let certified = Arc::clone(&certified);
                let _ = tokio::task::spawn_blocking(move || certified.reload()).await;
            }
        });
    }

    /// What every gRPC call (health too) passes first: with
    /// `--grpc-client-san`, the client's certificate must name it (a
    /// wildcard in the certificate counts, as in a server's), else the call
    /// is `UNAUTHENTICATED`.
    pub(super) fn interceptor(&self) -> impl tonic::service::Interceptor + Clone + use<> {
        let san = self.client_san.clone();
        move |request: tonic::Request<()>| {
            let Some(san) = &san else {
                return Ok(request);
            };
            let certs = peer_certs(&request);
            let leaf = certs.as_deref().and_then(|certs| certs.first());
            let named = leaf.is_some_and(|der| {
                webpki::EndEntityCert::try_from(der)
                    .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(san).is_ok())
            });
            if named {
                Ok(request)
            } else {
                Err(tonic::Status::unauthenticated(format!(
                    "the client certificate does not name {}",
                    san.to_str()
                )))
            }
        }
    }
}

/// The client's certificates, over TCP or a Unix socket.
fn peer_certs(request: &tonic::Request<()>) -> Option<Arc<Vec<CertificateDer<'static>>>> {
    use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
    let extensions = request.extensions();
    let tcp = extensions
        .get::<TlsConnectInfo<TcpConnectInfo>>()
        .and_then(TlsConnectInfo::peer_certs);
    #[cfg(unix)]
    let tcp = tcp.or_else(|| {
        extensions
            .get::<TlsConnectInfo<tonic::transport::server::UdsConnectInfo>>()
            .and_then(TlsConnectInfo::peer_certs)
    });
    tcp
}

/// `accepted` connections after their TLS handshakes, each made in a task
/// of its own (at most [`HANDSHAKE`] long), so that a slow or silent
/// client holds up no other; a failed handshake is dropped.
pub(super) fn incoming<S, IO>(
    accepted: S,
    acceptor: tokio_rustls::TlsAcceptor,
) -> impl Stream<Item = io::Result<tokio_rustls::server::TlsStream<IO>>>
where
    S: Stream<Item = io::Result<IO>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        let mut accepted = std::pin::pin!(accepted);
        while let Some(connection) = accepted.next().await {
            let Ok(io) = connection else {
                // Out of descriptors, say: let some close.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(io)).await {
                    let _ = tx.send(Ok(tls)).await;
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

//! Redis over TLS for a test: a throwaway CA and the certificates it signs
//! (made with rcgen, written to a directory of their own), and a
//! `redis-server` serving TLS with them.

use std::path::PathBuf;
use std::process::Child;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A CA, a server certificate it signed for `127.0.0.1` and `localhost`,
/// another for `redis.elsewhere.test` only, a client certificate it
/// signed, and a second CA that signed one more server certificate:
/// `ca.pem`, `server.pem` / `server.key`, `elsewhere.pem` /
/// `elsewhere.key`, `client.pem` / `client.key`, `other-ca.pem` and
/// `other-server.pem` / `other-server.key` in `dir`.
pub struct Pki {
    pub dir: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

fn signed(names: &[&str], by: &Issuer<'static, KeyPair>) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "slidelog test");
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, by).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("slidelog-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ca_pem, issuer) = ca("slidelog test CA");
        let (server, server_key) = signed(&["127.0.0.1", "localhost"], &issuer);
        let (elsewhere, elsewhere_key) = signed(&["redis.elsewhere.test"], &issuer);
        let (client, client_key) = signed(&["client.slidelog.test"], &issuer);
        let (other, other_issuer) = ca("another CA");
        let (other_server, other_server_key) = signed(&["127.0.0.1", "localhost"], &other_issuer);
        for (file, pem) in [
            ("ca.pem", ca_pem),
            ("server.pem", server),
            ("server.key", server_key),
            ("elsewhere.pem", elsewhere),
            ("elsewhere.key", elsewhere_key),
            ("client.pem", client),
            ("client.key", client_key),
            ("other-ca.pem", other),
            ("other-server.pem", other_server),
            ("other-server.key", other_server_key),
        ] {
            std::fs::write(dir.join(file), pem).unwrap();
        }
        Pki { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }
}

/// A throwaway `redis-server` answering TLS on `port` (its plain port,
/// 10,000 below, is how the harness sees it is up), killed on drop.
pub struct TlsRedis {
    child: Child,
    pub port: u16,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsRedis {
    /// A server presenting `cert.pem` (and `cert.key`) of `pki`; with
    /// `auth_clients`, refusing a client without a certificate `pki`'s CA
    /// signed. `None` as [`start_or_skip`](super::redis_server::start_or_skip).
    pub fn start(pki: &Pki, cert: &str, auth_clients: bool) -> Option<TlsRedis> {
        let file = |name: &str| pki.path(name).display().to_string();
        let (cert, key) = (file(&format!("{cert}.pem")), file(&format!("{cert}.key")));
        let (child, port) = super::redis_server::start_or_skip_with(|port| {
            vec![
                "--tls-port".into(),
                (port + 10_000).to_string(),
                "--tls-cert-file".into(),
                cert.clone(),
                "--tls-key-file".into(),
                key.clone(),
                "--tls-ca-cert-file".into(),
                file("ca.pem"),
                "--tls-auth-clients".into(),
                if auth_clients { "yes" } else { "no" }.into(),
            ]
        })?;
        Some(TlsRedis {
            child,
            port: port + 10_000,
        })
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }

    /// The same server's plaintext URL.
    pub fn plain_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port - 10_000)
    }
}

/// A 3-master Redis Cluster answering TLS too (`tls-cluster yes`: its bus
/// and what it tells TLS clients of its nodes), with `pki`'s server
/// certificate: the cluster and each node's TLS port. `None` as
/// [`cluster`](super::redis_cluster::cluster).
pub fn cluster_or_skip(pki: &Pki) -> Option<(super::redis_cluster::Cluster, Vec<u16>)> {
    let file = |name: &str| pki.path(name).display().to_string();
    let tls_ports = std::sync::Mutex::new(std::collections::HashMap::new());
    let cluster = super::redis_cluster::cluster_with(|port| {
        let tls = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        tls_ports.lock().unwrap().insert(port, tls);
        vec![
            "--tls-port".into(),
            tls.to_string(),
            "--tls-cluster".into(),
            "yes".into(),
            "--tls-cert-file".into(),
            file("server.pem"),
            "--tls-key-file".into(),
            file("server.key"),
            "--tls-ca-cert-file".into(),
            file("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    })?;
    let tls_ports = tls_ports.into_inner().unwrap();
    let ports = cluster.nodes.iter().map(|n| tls_ports[&n.port]).collect();
    Some((cluster, ports))
}

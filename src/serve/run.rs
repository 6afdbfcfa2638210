//! `slidelog serve` as a whole: the service, its store, health, the
//! gRPC, HTTP and metrics listeners, until SIGTERM or Ctrl-C.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;

use super::*;

/// Loads the configuration, then serves until SIGTERM or Ctrl-C (calls in
/// flight finish), re-reading it on change and on SIGHUP: `slidelog
/// serve`, on a multi-threaded tokio runtime of its own. (To serve the
/// rate-limit API in a server of your own, see [`Service`].)
///
/// ```no_run
/// use slidelog::serve::{Listen, Options, Settings};
///
/// slidelog::serve::run(&Options {
///     config: "/etc/ratelimit/config".into(),
///     grpc: Listen::Tcp("0.0.0.0:8081".parse().unwrap()),
///     grpc_tls: None,
///     metrics: Some("0.0.0.0:9102".parse().unwrap()),
///     http: Some("0.0.0.0:8080".parse().unwrap()),
///     merge_domains: false,
///     max_connection_age: std::time::Duration::from_secs(24 * 3600),
///     state_file: None,
///     state_interval: None,
///     redis_health_check: false,
///     settings: Settings::default(),
/// })?;
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
///
/// A configuration that does not load, an address that cannot be bound,
/// a state file that cannot be written at the stop.
pub fn run(options: &Options) -> Result<(), String> {
    let config = Config::load(&options.config, options.merge_domains)?;
    let domains = config.domains.len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        if let Some(addr) = options.metrics {
            serve_metrics(addr).await?;
        }
        let settings = Settings {
            metrics: options.metrics.is_some(),
            ..options.settings.clone()
        };
        let mut service = Service::new(config, settings)?;
        // The configuration at start counts as a load, as upstream's.
        metrics::counter!("ratelimit_service_config_load_success").increment(1);
        if let Some(store) = service.store.local() {
            eprintln!(
                "slidelog serve: logs in process, within --max-memory {} (keys idle past their longest window make room); while full, new clients are answered {} (--when-full {})",
                local::size(store.max_bytes()),
                if service.full.deny { "OVER_LIMIT" } else { "OK unrecorded" },
                if service.full.deny { "deny" } else { "admit" },
            );
        }
        if let Some(path) = &options.state_file {
            eprintln!("slidelog serve: {}", service.restore(path));
            let probe = partial(path);
            let written = std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe));
            if let Err(e) = written {
                eprintln!(
                    "slidelog serve: --state-file {}: cannot be written ({e}); the logs will not be kept across a restart",
                    path.display()
                );
            }
        }
        let service = Arc::new(service);
        let kept = Arc::clone(&service);
        if let (Some(path), Some(every)) = (&options.state_file, options.state_interval) {
            tokio::spawn(save_every(Arc::clone(&service), path.clone(), every));
        }
        watch(&options.config, options.merge_domains, Arc::clone(&service))?;
        let (reporter, health_service) = tonic_health::server::health_reporter();
        let health = Arc::new(Health::new(reporter));
        // Every name told from the start: not serving until the store is
        // ready, which in process it is at once.
        health.update(|_| {}).await;
        let connecting = connect_store(Arc::clone(&service), Arc::clone(&health));
        if service.store.local().is_some() {
            connecting.await;
        } else if options.redis_health_check {
            let (service, health) = (Arc::clone(&service), Arc::clone(&health));
            tokio::spawn(async move {
                connecting.await;
                watch_redis(service, health).await;
            });
        } else {
            tokio::spawn(connecting);
        }
        if let Some(addr) = options.http {
            serve_http(addr, Arc::clone(&service), Arc::clone(&health)).await?;
        }
        // TLS is ours, not tonic's: the certificate in force is read again
        // as it changes (tls.rs).
        let acceptor = options
            .grpc_tls
            .as_ref()
            .map(|tls| {
                tls.reload_as_they_change();
                tls.acceptor()
            })
            .transpose()?;
        let mut server =
            tonic::transport::Server::builder().max_connection_age(options.max_connection_age);
        let router = match options.grpc_tls.as_ref().filter(|tls| tls.client_san.is_some()) {
            None => server
                .add_service(health_service)
                .add_service(RateLimitServiceServer::from_arc(service)),
            Some(tls) => server
                .add_service(tonic::service::interceptor::InterceptedService::new(
                    health_service,
                    tls.interceptor(),
                ))
                .add_service(tonic::service::interceptor::InterceptedService::new(
                    RateLimitServiceServer::from_arc(service),
                    tls.interceptor(),
                )),
        };
        // SIGTERM or Ctrl-C: health says so first, then calls in flight
        // finish.
        let stop = async move {
            shutdown_signal().await;
            health.update(|state| state.stopping = true).await;
        };
        let tls = match &options.grpc_tls {
            None => "",
            Some(tls) if tls.mutual() => " over mutual TLS",
            Some(_) => " over TLS",
        };
        let announce = |on: &dyn std::fmt::Display| {
            eprintln!(
                "slidelog serve: {domains} domain{} from {}, gRPC on {on}{tls}",
                if domains == 1 { "" } else { "s" },
                options.config.display(),
            );
        };
        let served = match &options.grpc {
            Listen::Tcp(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("--grpc {addr}: {e}"))?;
                announce(&listener.local_addr().map_err(|e| e.to_string())?);
                let incoming =
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
                match acceptor {
                    Some(acceptor) => {
                        let incoming = tls::incoming(incoming, acceptor);
                        router.serve_with_incoming_shutdown(incoming, stop).await
                    }
                    None => router.serve_with_incoming_shutdown(incoming, stop).await,
                }
            }
            #[cfg(unix)]
            Listen::Unix(path) => {
                let listener = bind_unix(path)?;
                announce(&format!("unix:{}", path.display()));
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
                let served = match acceptor {
                    Some(acceptor) => {
                        let incoming = tls::incoming(incoming, acceptor);
                        router.serve_with_incoming_shutdown(incoming, stop).await
                    }
                    None => router.serve_with_incoming_shutdown(incoming, stop).await,
                };
                let _ = std::fs::remove_file(path);
                served
            }
            #[cfg(not(unix))]
            Listen::Unix(_) => return Err("--grpc-uds needs a Unix system".into()),
        };
        served.map_err(|e| e.to_string())?;
        if let Some(path) = &options.state_file {
            eprintln!("slidelog serve: {}", kept.save(path)?);
        }
        eprintln!("slidelog serve: stopped");
        Ok(())
    })
}

/// Listens on the Unix socket `path`. A socket file already there that no
/// process answers on (left by one that was killed) is replaced; one that
/// answers is another service's, and refused.
#[cfg(unix)]
pub(super) fn bind_unix(path: &std::path::Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    let bind = || {
        tokio::net::UnixListener::bind(path)
            .map_err(|e| format!("--grpc-uds {}: {e}", path.display()))
    };
    let error = match bind() {
        Ok(listener) => return Ok(listener),
        Err(error) => error,
    };
    let socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !socket {
        return Err(error);
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(format!(
            "--grpc-uds {}: another process is serving on it",
            path.display()
        ));
    }
    std::fs::remove_file(path).map_err(|e| format!("--grpc-uds {}: {e}", path.display()))?;
    bind()
}

/// SIGTERM or Ctrl-C.
pub(super) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    eprintln!("slidelog serve: shutting down (calls in flight finish)");
}

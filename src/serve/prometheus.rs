//! `--metrics`: the Prometheus exporter and the metric families described.

use std::net::SocketAddr;

/// Serves Prometheus metrics on `addr` (`/metrics`).
pub(super) async fn serve_metrics(addr: SocketAddr) -> Result<(), String> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("--metrics: {e}"))?;
    describe();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move { handle.render() }),
    );
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("slidelog serve: metrics (GET /metrics) on {bound}");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

pub(super) fn describe() {
    use metrics::{Unit, describe_counter, describe_histogram};
    for (family, what) in [
        (
            "ratelimit_service_rate_limit_total_hits",
            "Hits per domain and descriptor (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_over_limit",
            "Hits over the limit (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_near_limit",
            "Hits admitted near the limit (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_within_limit",
            "Hits admitted (upstream's family).",
        ),
        (
            "ratelimit_service_rate_limit_shadow_mode",
            "Hits over the limit answered OK in shadow mode (upstream's family).",
        ),
        (
            "ratelimit_service_config_load_success",
            "Configuration loads that took effect, the one at start included (upstream's family).",
        ),
        (
            "ratelimit_service_global_shadow_mode",
            "Requests over the limit answered OK under --shadow-mode (upstream's family).",
        ),
        (
            "ratelimit_service_config_load_error",
            "Configuration reloads refused (upstream's family).",
        ),
    ] {
        describe_counter!(family, Unit::Count, what);
    }
    describe_counter!(
        "slidelog_rls_hits_total",
        Unit::Count,
        "Hits (hits_addend units) per domain and descriptor."
    );
    describe_counter!(
        "slidelog_rls_over_limit_total",
        Unit::Count,
        "Descriptors answered OVER_LIMIT."
    );
    describe_counter!(
        "slidelog_rls_near_limit_total",
        Unit::Count,
        "Admissions that left more of the limit used than --near-limit-ratio."
    );
    describe_counter!(
        "slidelog_rls_shadow_mode_total",
        Unit::Count,
        "Over-limit descriptors answered OK in shadow mode."
    );
    describe_counter!(
        "slidelog_rls_store_full_total",
        Unit::Count,
        "Descriptors of new clients met while the in-process store was full (answered as --when-full says)."
    );
    describe_counter!(
        "slidelog_rls_global_shadow_mode_total",
        Unit::Count,
        "Requests over the limit answered OK under --shadow-mode."
    );
    describe_histogram!(
        "slidelog_rls_request_seconds",
        Unit::Seconds,
        "Time to decide one ShouldRateLimit call."
    );
}

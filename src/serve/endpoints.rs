//! `--http`: `POST /json`, `GET /healthcheck` and `GET /rlconfig`.

use std::net::SocketAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use super::*;

/// `--http`: `POST /json`, `ShouldRateLimit` in proto3's JSON mapping
/// (200 when the request is not over, 429 when it is, 400 with the reason
/// for a malformed one, 503 while the store cannot answer), `GET
/// /healthcheck` (200 `OK` while serving, else 500 with no body), as envoyproxy/
/// ratelimit's HTTP port has them, and `GET /rlconfig`, the configuration
/// in force (as `--check` prints it; upstream's debug port has one).
pub(super) async fn serve_http(
    addr: SocketAddr,
    service: Arc<Service>,
    health: Arc<Health>,
) -> Result<(), String> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let current = Arc::clone(&service);
    let rlconfig = move || async move { describe_config(&current.config.load()) };
    let decide = move |body: axum::body::Bytes| async move {
        let request = match json::request(&body) {
            Ok(request) => request,
            Err(reason) => return (StatusCode::BAD_REQUEST, reason + "\n").into_response(),
        };
        match service.decide(&request).await {
            Ok(response) => {
                let status = if response.overall_code == Code::OverLimit as i32 {
                    StatusCode::TOO_MANY_REQUESTS
                } else {
                    StatusCode::OK
                };
                let body = json::response(&response).to_string();
                (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
            }
            Err(error) => {
                let status = match error.code() {
                    tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
                    tonic::Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                (status, format!("{}\n", error.message())).into_response()
            }
        }
    };
    let app = axum::Router::new()
        .route("/json", axum::routing::post(decide))
        .route("/rlconfig", axum::routing::get(rlconfig))
        .route(
            "/healthcheck",
            axum::routing::get(move || async move {
                // Upstream's answers: `OK`, or 500 with no body.
                if health.serving().await {
                    (StatusCode::OK, "OK")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "")
                }
            }),
        );
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("slidelog serve: HTTP (POST /json, GET /healthcheck, GET /rlconfig) on {bound}");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(())
}

//! The tower layer in front of a real tonic server over HTTP/2 on loopback
//! (`DenyStyle::Grpc`): calls within the limit pass, the next one is
//! `RESOURCE_EXHAUSTED` with `retry-after` and the `ratelimit` fields as
//! metadata, keys are counted apart, and the handler never runs for a
//! denial.

#![cfg(feature = "tower")]

use std::sync::Arc;
use std::time::Duration;

use slidelog::tower::{DenyStyle, HeaderKey, RateLimitLayer};
use slidelog::{KeyedLimiter, ManualClock};
use tonic::Code;

#[path = "../examples/grpc/greeter.rs"]
mod greeter;

#[tokio::test]
async fn grpc_calls_are_limited_end_to_end() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        KeyedLimiter::<String>::builder(2, Duration::from_secs(10))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let layer = RateLimitLayer::new(Arc::clone(&limiter), HeaderKey::new("x-api-key"))
        .deny_style(DenyStyle::Grpc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(greeter::Greeter)
            .serve_with_incoming(incoming)
            .await
            .unwrap();
    });
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();

    for i in 0..2 {
        let reply = greeter::say_hello(channel.clone(), "alice", "alice")
            .await
            .unwrap();
        assert_eq!(reply.get_ref().message, "hello, alice");
        let remaining = 1 - i;
        assert_eq!(
            reply.metadata().get("ratelimit").unwrap().to_str().unwrap(),
            format!("\"default\";r={remaining};t=10")
        );
    }
    clock.advance(Duration::from_millis(2_500));
    let status = greeter::say_hello(channel.clone(), "alice", "alice")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "rate limit exceeded");
    assert_eq!(status.metadata().get("retry-after").unwrap(), "8");
    assert_eq!(
        status.metadata().get("ratelimit-policy").unwrap(),
        "\"default\";q=2;w=10"
    );
    // Another key has its own log.
    assert!(
        greeter::say_hello(channel.clone(), "bob", "bob")
            .await
            .is_ok()
    );
    // Exactly when the window frees, alice passes again.
    clock.advance(Duration::from_millis(7_500));
    assert!(
        greeter::say_hello(channel.clone(), "alice", "alice")
            .await
            .is_ok()
    );
    // A call without a key: INVALID_ARGUMENT, explained, never passed
    // through.
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let status = grpc
        .unary(
            tonic::Request::new(greeter::HelloRequest {
                name: "anon".into(),
            }),
            http::uri::PathAndQuery::from_static(greeter::SAY_HELLO),
            tonic_prost::ProstCodec::<greeter::HelloRequest, greeter::HelloReply>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "no rate-limit key"),
        "{status:?}"
    );
}

//! A hand-written unary gRPC service for the tonic example and its test:
//! what `tonic-build` would generate for
//! `service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }`,
//! written out so that nothing needs `protoc`.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

/// `message HelloRequest { string name = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HelloRequest {
    #[prost(string, tag = "1")]
    pub(crate) name: String,
}

/// `message HelloReply { string message = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HelloReply {
    #[prost(string, tag = "1")]
    pub(crate) message: String,
}

/// The method's path.
pub(crate) const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";

/// The server: answers `SayHello` with a greeting.
#[derive(Clone, Default)]
pub(crate) struct Greeter;

impl NamedService for Greeter {
    const NAME: &'static str = "helloworld.Greeter";
}

struct SayHello;

impl tonic::server::UnaryService<HelloRequest> for SayHello {
    type Response = HelloReply;
    type Future = Pin<Box<dyn Future<Output = Result<Response<HelloReply>, Status>> + Send>>;

    fn call(&mut self, request: Request<HelloRequest>) -> Self::Future {
        let name = request.into_inner().name;
        Box::pin(async move {
            Ok(Response::new(HelloReply {
                message: format!("hello, {name}"),
            }))
        })
    }
}

impl tower::Service<http::Request<Body>> for Greeter {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() == SAY_HELLO {
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                Ok(grpc.unary(SayHello, request).await)
            })
        } else {
            Box::pin(async move { Ok(Status::unimplemented("no such method").into_http()) })
        }
    }
}

/// Calls `SayHello` as `api_key` (in the `x-api-key` metadata).
pub(crate) async fn say_hello(
    channel: tonic::transport::Channel,
    api_key: &str,
    name: &str,
) -> Result<Response<HelloReply>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut request = Request::new(HelloRequest { name: name.into() });
    request.metadata_mut().insert(
        "x-api-key",
        api_key
            .parse()
            .map_err(|_| Status::invalid_argument("api key"))?,
    );
    let codec = tonic_prost::ProstCodec::<HelloRequest, HelloReply>::default();
    grpc.unary(
        request,
        http::uri::PathAndQuery::from_static(SAY_HELLO),
        codec,
    )
    .await
}

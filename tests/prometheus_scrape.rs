//! The Prometheus example's app, served on a real socket and scraped over
//! HTTP through a real recorder: the families the crate emits, labelled by
//! limiter, each with its help text.

#![cfg(all(feature = "tower", feature = "metrics"))]

#[path = "../examples/prometheus.rs"]
#[allow(dead_code)]
mod example;

use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::test(flavor = "current_thread")]
async fn the_example_serves_a_scrape() {
    let handle = PrometheusBuilder::new().install_recorder().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(example::serve(listener, example::app(handle).unwrap()));
    let mut statuses = Vec::new();
    for _ in 0..15 {
        statuses.push(example::get_over_http(addr, "/").await.unwrap().0);
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 10);
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 5);
    let (status, scrape) = example::get_over_http(addr, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    let value = |series: &str| {
        scrape
            .lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
            .to_string()
    };
    assert_eq!(
        value(r#"slidelog_requests_total{limiter="api",decision="admitted"}"#),
        "10"
    );
    assert_eq!(
        value(r#"slidelog_requests_total{limiter="api",decision="denied"}"#),
        "5"
    );
    assert_eq!(
        value(r#"slidelog_denials_total{limiter="api",reason="rate_limited",policy="1s"}"#),
        "5"
    );
    assert_eq!(value(r#"slidelog_keys_live{limiter="clients"}"#), "1");
    for family in [
        "slidelog_requests_total",
        "slidelog_denials_total",
        "slidelog_keys_live",
    ] {
        assert!(scrape.contains(&format!("# HELP {family} ")), "{scrape}");
        assert!(scrape.contains(&format!("# TYPE {family} ")), "{scrape}");
    }
}

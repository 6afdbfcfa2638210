//! What one descriptor's decision adds to the metrics: the service's own
//! families (`slidelog_rls_*_total{domain, descriptor}`, by the configured
//! path) and, beside them, the families envoyproxy/ratelimit's Prometheus
//! exporter serves (`ratelimit_service_rate_limit_{total_hits, over_limit,
//! near_limit, within_limit, shadow_mode}{domain, key1, key2}`, counted in
//! hits as upstream counts them), so that dashboards and alerts written for
//! upstream keep working.

/// A descriptor's label sets, built only while metrics are served.
pub(super) struct Tally {
    ours: [(&'static str, String); 2],
    /// Upstream's labels, for a configured descriptor (a request's own
    /// limit has no path in the configuration).
    upstream: Option<Vec<(&'static str, String)>>,
    hits: u64,
}

impl Tally {
    /// `descriptor` is the configured path's label; `stat_path` its levels
    /// as upstream names them (`key`, or `key_value`).
    pub(super) fn new(
        domain: &str,
        descriptor: &str,
        stat_path: Option<&[String]>,
        hits: u32,
    ) -> Tally {
        let upstream = stat_path.map(|path| {
            let mut labels = vec![("domain", domain.to_string())];
            // Upstream's mapping names the first two levels.
            for (name, level) in ["key1", "key2"].into_iter().zip(path) {
                labels.push((name, level.clone()));
            }
            labels
        });
        Tally {
            ours: [
                ("domain", domain.to_string()),
                ("descriptor", descriptor.to_string()),
            ],
            upstream,
            hits: u64::from(hits),
        }
    }

    /// The descriptor was asked for its hits.
    pub(super) fn asked(&self) {
        metrics::counter!("slidelog_rls_hits_total", &self.ours).increment(self.hits);
        self.upstream("ratelimit_service_rate_limit_total_hits");
    }

    /// Admitted, and near its limit after it if `near`.
    pub(super) fn within(&self, near: bool) {
        self.upstream("ratelimit_service_rate_limit_within_limit");
        if near {
            metrics::counter!("slidelog_rls_near_limit_total", &self.ours).increment(1);
            self.upstream("ratelimit_service_rate_limit_near_limit");
        }
    }

    /// Over its limit: answered so, or OK in shadow mode if `shadow`.
    pub(super) fn over(&self, shadow: bool) {
        self.upstream("ratelimit_service_rate_limit_over_limit");
        if shadow {
            metrics::counter!("slidelog_rls_shadow_mode_total", &self.ours).increment(1);
            self.upstream("ratelimit_service_rate_limit_shadow_mode");
        } else {
            metrics::counter!("slidelog_rls_over_limit_total", &self.ours).increment(1);
        }
    }

    /// A new client met a full in-process store.
    pub(super) fn full(&self) {
        metrics::counter!("slidelog_rls_store_full_total", &self.ours).increment(1);
    }

    fn upstream(&self, family: &'static str) {
        if let Some(labels) = &self.upstream {
            metrics::counter!(family, labels.as_slice()).increment(self.hits);
        }
    }
}

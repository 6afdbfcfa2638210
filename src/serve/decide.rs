//! The decision: each matched descriptor checked against its store, and
//! the request's answer made of their statuses.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::Status;

use crate::{DenyReason, Request};

use super::*;

/// Whether an admission that leaves `remaining` of `limit` is near the
/// limit at `ratio`: more used than `floor(limit * ratio)`, as
/// envoyproxy/ratelimit computes its threshold.
pub(super) fn near_limit(limit: u32, remaining: u32, ratio: f64) -> bool {
    let threshold = (f64::from(limit) * ratio).floor();
    f64::from(limit.saturating_sub(remaining)) > threshold
}

impl Service {
    /// `ShouldRateLimit`, decided.
    pub(crate) async fn decide(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let started = Instant::now();
        if request.domain.is_empty() {
            return Err(Status::invalid_argument("the domain is empty"));
        }
        if request.descriptors.is_empty() {
            return Err(Status::invalid_argument("no descriptors"));
        }
        let config = self.config.load();
        let mut matched: Vec<Option<Matched<'_>>> = Vec::with_capacity(request.descriptors.len());
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            matched.push(self.matched(
                &config,
                &request.domain,
                descriptor,
                request.hits_addend,
                i,
            )?);
        }
        // `replaces`: a matched limit that another matched limit of the
        // request names in its `replaces` is not checked, as in
        // envoyproxy/ratelimit (its descriptor is answered as unmatched).
        let replaced: Vec<&str> = matched
            .iter()
            .flatten()
            .filter(|m| m.over.is_none())
            .filter_map(|m| m.rule)
            .flat_map(|rule: &Rule| rule.replaces.iter().map(String::as_str))
            .collect();
        let named = |m: &Matched<'_>| {
            m.over.is_none()
                && m.limit()
                    .shown()
                    .iter()
                    .any(|s| !s.name.is_empty() && replaced.contains(&s.name.as_str()))
        };
        for slot in matched.iter_mut() {
            if slot.as_ref().is_some_and(named) {
                *slot = None;
            }
        }
        // All or nothing: refuse everything if the request would be over,
        // recording nothing (a concurrent request can still fill a window
        // between this look and the checks below: see the docs).
        let mut dry = false;
        // `--all-or-nothing`: a descriptor that would be over — in shadow
        // or quota mode too — stops every other's count, as upstream's
        // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT does.
        if self.modes.all_or_nothing {
            for m in matched.iter().flatten() {
                let over = match (m.blocked(), &m.quota) {
                    (Some(_), _) => !m.look,
                    (None, Some(_)) => self
                        .store
                        .judge_key(&m.key, Request::units(m.hits).dry())
                        .await?
                        .is_err(),
                    (None, None) => false,
                };
                if over {
                    dry = true;
                    break;
                }
            }
        }
        let mut statuses = Vec::with_capacity(matched.len());
        let mut verdicts = Vec::with_capacity(matched.len());
        for m in &matched {
            let status = match m {
                None => DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
                Some(m) => self.status(&request.domain, m, dry).await?,
            };
            verdicts.push((
                status.code == Code::OverLimit as i32,
                self.quota_mode(m.as_ref()),
            ));
            statuses.push(status);
        }
        let over = config::overall_over(verdicts.iter().copied());
        if over && self.modes.shadow_mode && self.metrics {
            metrics::counter!("slidelog_rls_global_shadow_mode_total", "domain" => request.domain.clone())
                .increment(1);
            // Upstream's family (its exporter's name, no label).
            metrics::counter!("ratelimit_service_global_shadow_mode").increment(1);
        }
        let overall = if over && !self.modes.shadow_mode {
            Code::OverLimit
        } else {
            Code::Ok
        };
        if self.metrics {
            metrics::histogram!("slidelog_rls_request_seconds")
                .record(started.elapsed().as_secs_f64());
        }
        // The headers describe what was decided, shadow mode or not (as
        // upstream adds them before its global shadow mode answers OK).
        let response_headers_to_add = self
            .headers
            .as_ref()
            .and_then(|names| Some(names.values(&statuses[closest(&statuses, &verdicts)?])))
            .unwrap_or_default();
        let dynamic_metadata = self
            .dynamic_metadata
            .then(|| dynamic_metadata(request, &matched, &statuses));
        Ok(RateLimitResponse {
            overall_code: overall as i32,
            statuses,
            response_headers_to_add,
            dynamic_metadata,
            ..Default::default()
        })
    }

    /// Whether a descriptor (`None`: unmatched or replaced) counts in
    /// quota mode (see [`config::overall_over`]): every one under
    /// `--quota-mode` but an unlimited one, and a limit its rule puts in
    /// `quota_mode` — as in envoyproxy/ratelimit, where the global mode
    /// also takes in the unmatched and a request's own limits, and a
    /// request's own limit is never in a rule's quota mode.
    pub(super) fn quota_mode(&self, m: Option<&Matched<'_>>) -> bool {
        let global = self.modes.quota_mode;
        match m {
            Some(m) if m.over.is_none() => match m.limit() {
                Limit::Unlimited => false,
                Limit::Quota(..) | Limit::Blocked(..) => {
                    global || m.rule.is_some_and(|rule| rule.quota_mode)
                }
                Limit::None => global,
            },
            _ => global,
        }
    }

    pub(super) async fn status(
        &self,
        domain: &str,
        m: &Matched<'_>,
        dry: bool,
    ) -> Result<DescriptorStatus, Status> {
        let ok = DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        };
        let shown = match (m.limit(), m.over) {
            (_, Some((rpu, unit))) => vec![config::Shown {
                requests_per_unit: rpu,
                unit: Some(unit),
                name: String::new(),
            }],
            (Limit::Quota(_, shown) | Limit::Blocked(shown, ..), None) => shown.clone(),
            // As envoyproxy/ratelimit answers an unlimited descriptor.
            (Limit::Unlimited, None) => {
                return Ok(DescriptorStatus {
                    limit_remaining: u32::MAX,
                    ..ok
                });
            }
            (Limit::None, None) => return Ok(ok),
        };
        let limit_of = |policy: usize| {
            let s = &shown[policy.min(shown.len() - 1)];
            RateLimit {
                name: s.name.clone(),
                requests_per_unit: s.requests_per_unit,
                unit: pb_unit(s.unit) as i32,
            }
        };
        let tally = self.metrics.then(|| {
            let stat_path = m
                .rule
                .filter(|_| m.over.is_none())
                .map(|r| &r.stat_path[..]);
            Tally::new(domain, m.label(), stat_path, m.hits)
        });
        if let Some(tally) = &tally {
            tally.asked();
        }
        match (m.blocked(), &m.quota) {
            // No request fits a zero limit: over for a window, whatever is
            // asked (a look, which asks for nothing, changes nothing).
            (Some((zero, window)), _) if !m.look => {
                return Ok(self.over(tally.as_ref(), m, window, limit_of(zero)));
            }
            (Some((zero, window)), _) => {
                return Ok(DescriptorStatus {
                    current_limit: Some(limit_of(zero)),
                    duration_until_reset: Some(pb_duration(window)),
                    ..ok
                });
            }
            (None, Some(_)) => {}
            (None, None) => return Ok(ok),
        }
        let dry = dry || m.look;
        let request = match Request::units(m.hits) {
            request if dry => request.dry(),
            request => request,
        };
        let decision = self.store.judge_key(&m.key, request).await?;
        Ok(match decision {
            Ok((admitted, growth)) if !dry => {
                let limit = &shown[admitted.policy().min(shown.len() - 1)];
                if let Some(tally) = &tally {
                    tally.within(near_limit(
                        limit.requests_per_unit,
                        admitted.remaining(),
                        self.near_limit_ratio,
                    ));
                }
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: Some(limit_of(admitted.policy())),
                    limit_remaining: admitted.remaining(),
                    duration_until_reset: Some(pb_duration(growth)),
                    ..Default::default()
                }
            }
            // A dry run of an all-or-nothing request that another
            // descriptor refused, or a look (no hits): nothing was
            // recorded for this one, so a second look tells when its room
            // grows.
            Ok((admitted, _)) => {
                let room = admitted.remaining().saturating_add(m.hits);
                DescriptorStatus {
                    code: Code::Ok as i32,
                    current_limit: Some(limit_of(admitted.policy())),
                    limit_remaining: room,
                    duration_until_reset: Some(pb_duration(self.growth(&m.key, room).await?)),
                    ..Default::default()
                }
            }
            Err(denied) if matches!(denied.reason(), DenyReason::KeyCapacity) => {
                let Some(store) = self.store.local() else {
                    unreachable!("only the in-process store has a memory budget")
                };
                self.full.met(store);
                if let Some(tally) = &tally {
                    tally.full();
                }
                if self.full.deny {
                    return Ok(self.over(tally.as_ref(), m, Duration::ZERO, limit_of(0)));
                }
                // Nothing recorded: the client is as new as it was.
                let limit = limit_of(0);
                DescriptorStatus {
                    code: Code::Ok as i32,
                    limit_remaining: limit.requests_per_unit.saturating_sub(m.hits),
                    current_limit: Some(limit),
                    duration_until_reset: Some(pb_duration(Duration::ZERO)),
                    ..Default::default()
                }
            }
            Err(denied) => {
                let wait = match denied.reason() {
                    DenyReason::RateLimited => denied.retry_after(),
                    _ => Duration::ZERO,
                };
                self.over(tally.as_ref(), m, wait, limit_of(denied.policy()))
            }
        })
    }

    /// When the room `room` left for `key` next grows, for a
    /// status that recorded nothing: the wait until `room + 1` units fit,
    /// or zero when they never can (the window holds no admission) or
    /// already do (an admission left it since the room was read).
    pub(super) async fn growth(&self, key: &String, room: u32) -> Result<Duration, Status> {
        let more = self
            .store
            .judge_key(key, Request::units(room.saturating_add(1)).dry());
        Ok(match more.await? {
            Err(denied) if matches!(denied.reason(), DenyReason::RateLimited) => {
                denied.retry_after()
            }
            _ => Duration::ZERO,
        })
    }

    pub(super) fn over(
        &self,
        tally: Option<&Tally>,
        m: &Matched<'_>,
        wait: Duration,
        limit: RateLimit,
    ) -> DescriptorStatus {
        if let Some(tally) = tally {
            tally.over(m.shadow());
        }
        if m.shadow() {
            return DescriptorStatus {
                code: Code::Ok as i32,
                current_limit: Some(limit),
                limit_remaining: 0,
                duration_until_reset: Some(pb_duration(wait)),
                ..Default::default()
            };
        }
        DescriptorStatus {
            code: Code::OverLimit as i32,
            current_limit: Some(limit),
            limit_remaining: 0,
            duration_until_reset: Some(pb_duration(wait)),
            ..Default::default()
        }
    }
}

//! Decoding a request's descriptors and matching them to the
//! configuration: what each one is checked by, under which key.

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use tonic::Status;

use crate::Quota;

use super::*;

/// Whether a refill (`is_negative_hits`) has been reported.
pub(super) static REFILLS: std::sync::Once = std::sync::Once::new();

/// One descriptor of a request, matched.
pub(super) struct Matched<'c> {
    pub(super) key: String,
    /// The configured descriptor it matched: `None` only for a request's
    /// own limit in a known domain, which applies whether or not the
    /// domain configures the descriptor (as in envoyproxy/ratelimit).
    pub(super) rule: Option<&'c Rule>,
    pub(super) hits: u32,
    /// A look: a descriptor's own `hits_addend` of 0 (upstream's check
    /// without an increment) or a refill (`is_negative_hits`), answered
    /// with the room left, recording
    /// nothing and returning nothing (see [`Service::matched`]).
    pub(super) look: bool,
    /// A request's own limit (`RateLimitDescriptor.limit`), honoured.
    pub(super) over: Option<(u32, Unit)>,
    /// The policies this descriptor is checked by (`None`: not limited):
    /// the request's own limit, else its rule's.
    pub(super) quota: Option<Quota>,
    /// Its key is longer than the store keeps ([`Store::refuses`]).
    pub(super) refused: bool,
}

impl Matched<'_> {
    /// The zero limit (`requests_per_unit: 0`) that decides this
    /// descriptor — its place among the limits shown and its window — if
    /// any: the request's own limit, else its rule's.
    /// A limited descriptor whose key the store refuses is blocked too
    /// (reported by its first limit, with no wait to tell).
    pub(super) fn blocked(&self) -> Option<(usize, Duration)> {
        if self.refused && self.quota.is_some() {
            return Some((0, Duration::ZERO));
        }
        match (self.limit(), self.over) {
            (_, Some((0, unit))) => Some((0, unit.duration())),
            (Limit::Blocked(_, zero, window), None) => Some((*zero, *window)),
            _ => None,
        }
    }

    /// The configured limit (`Limit::None` without a rule).
    pub(super) fn limit(&self) -> &Limit {
        self.rule.map_or(&Limit::None, |rule| &rule.limit)
    }

    /// Whether it is in shadow mode: its rule's, unless the request brought
    /// its own limit (which envoyproxy/ratelimit never shadows).
    pub(super) fn shadow(&self) -> bool {
        self.over.is_none() && self.rule.is_some_and(|rule| rule.shadow)
    }

    /// The `descriptor` label of its metrics: its rule's path, or one
    /// label for every unconfigured descriptor a request limits itself
    /// (their keys are the client's: a label each would let clients grow
    /// the series without bound).
    pub(super) fn label(&self) -> &str {
        self.rule.map_or("(unconfigured)", |rule| &rule.label)
    }
}

impl Service {
    pub(super) fn matched<'c>(
        &self,
        config: &'c Config,
        domain: &str,
        descriptor: &RateLimitDescriptor,
        request_hits: u32,
        index: usize,
    ) -> Result<Option<Matched<'c>>, Status> {
        if descriptor.entries.is_empty() {
            return Err(Status::invalid_argument(format!(
                "descriptor {index} has no entries"
            )));
        }
        let mut entries = Vec::with_capacity(descriptor.entries.len());
        for entry in &descriptor.entries {
            if entry.key.is_empty() {
                return Err(Status::invalid_argument(format!(
                    "descriptor {index} has an entry without a key"
                )));
            }
            entries.push((entry.key.clone(), entry.value.clone()));
        }
        // Hits past `u32::MAX` are past every limit: over, as any weight
        // above the limit is (an error here would fail open in Envoy, and
        // the weight may come from a response's token count).
        // A descriptor's own 0 is a look, as upstream reads it ("check
        // only"); the request's 0 is its default, 1.
        let hits = match descriptor.hits_addend.as_ref().map(|h| h.value) {
            Some(h) => u32::try_from(h).unwrap_or(u32::MAX),
            None => request_hits.max(1),
        };
        // A refill gives back hits an earlier call counted. The log cannot:
        // its ring only records admissions, each kept until it leaves its
        // window. So a refill is answered as envoyproxy/ratelimit answers
        // one — OK, with the room left — and changes nothing; the first
        // one is reported.
        let refill = descriptor.is_negative_hits;
        if refill {
            REFILLS.call_once(|| {
                eprintln!(
                    "slidelog serve: a descriptor with is_negative_hits (a refill) is answered OK \
                     and changes nothing: an exact log keeps each admission until it leaves its \
                     window (reported once)"
                );
            });
        }
        let look = refill || hits == 0;
        let hits = if look { 0 } else { hits };
        let over = match &descriptor.limit {
            None => None,
            Some(limit) => {
                let unit = from_pb_unit(limit.unit).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "descriptor {index}: a limit override without a unit"
                    ))
                })?;
                Some((limit.requests_per_unit, unit))
            }
        };
        // The levels matched by a wildcard with `share_threshold`: their
        // values share one log, so the key holds the pattern instead.
        let mut shared: Vec<(usize, &str)> = Vec::new();
        let rule = config.walk(domain, &entries, |i, rule| {
            if let (true, Some(pattern)) = (rule.shared, rule.value.as_deref()) {
                shared.push((i, pattern));
            }
        });
        // A request's own limit applies to any descriptor of a known
        // domain; otherwise only a configured descriptor is limited.
        if rule.is_none() && (over.is_none() || !config.domains.contains_key(domain)) {
            return Ok(None);
        }
        // A request's own limit keys by its own values, as upstream's.
        if rule.is_some() && over.is_none() {
            for (i, pattern) in shared {
                entries[i].1 = pattern.to_owned();
            }
        }
        let quota = match (over, rule.map_or(&Limit::None, |rule| &rule.limit)) {
            // A zero blocks, as a zero in the configuration does.
            (Some((0, _)), _) => None,
            (Some((rpu, unit)), _) => Some(Quota::new(rpu, unit.duration()).map_err(|e| {
                Status::invalid_argument(format!(
                    "descriptor {index}: a limit override of {rpu} per {unit:?}: {e}"
                ))
            })?),
            (None, Limit::Quota(quota, _)) => Some(quota.clone()),
            (None, Limit::None | Limit::Unlimited | Limit::Blocked(..)) => None,
        };
        let key = key::encode(domain, &entries, over);
        let refused = self.store.refuses(&key);
        Ok(Some(Matched {
            refused,
            key,
            rule,
            hits,
            look,
            over,
            quota,
        }))
    }
}

pub(super) fn from_pb_unit(unit: i32) -> Option<Unit> {
    // envoy.type.v3.RateLimitUnit: 1 second .. 4 day, 5 month, 6 year, 7 week.
    Some(match unit {
        1 => Unit::Second,
        2 => Unit::Minute,
        3 => Unit::Hour,
        4 => Unit::Day,
        5 => Unit::Month,
        6 => Unit::Year,
        7 => Unit::Week,
        _ => return None,
    })
}

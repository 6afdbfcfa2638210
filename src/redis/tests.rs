use super::Layout;
use super::health::{cluster_slot, keys_on_each_primary};
use super::keys::redis_name;
use proptest::prelude::*;

/// Slots as Redis computes them (`CLUSTER KEYSLOT`, and the Redis
/// Cluster specification's hash tag examples).
#[test]
fn cluster_slots_are_redis_own() {
    assert_eq!(cluster_slot(b"foo"), 12_182);
    assert_eq!(cluster_slot(b"123456789"), 0x31C3);
    assert_eq!(
        cluster_slot(b"{user1000}.following"),
        cluster_slot(b"user1000")
    );
    assert_ne!(cluster_slot(b"foo{}{bar}"), cluster_slot(b"bar"));
    assert_eq!(cluster_slot(b"foo{{bar}}zap"), cluster_slot(b"{bar"));
    assert_eq!(cluster_slot(b"foo{bar}{zap}"), cluster_slot(b"bar"));
}

/// One key per primary, each in that primary's slots; a hash-tagged
/// prefix reaches only the primary of its slot.
#[test]
fn a_key_lands_on_each_primary() {
    use ::redis::Value;
    let node = |port: i64| {
        Value::Array(vec![
            Value::BulkString(b"127.0.0.1".to_vec()),
            Value::Int(port),
        ])
    };
    let range = |start: i64, end: i64, port: i64| {
        Value::Array(vec![Value::Int(start), Value::Int(end), node(port)])
    };
    // The primary on port 1 owns two ranges, the one on port 3 one slot.
    let slots = Value::Array(vec![
        range(0, 5000, 1),
        range(5001, 5001, 3),
        range(5002, 10_000, 2),
        range(10_001, 16_383, 1),
    ]);
    let keys = keys_on_each_primary("p:", &slots).unwrap();
    let owners: Vec<u16> = keys.iter().map(|k| cluster_slot(k.as_bytes())).collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(owners[0] <= 5000 || owners[0] > 10_000, "{owners:?}");
    assert_eq!(owners[1], 5001, "{owners:?}");
    assert!((5002..=10_000).contains(&owners[2]), "{owners:?}");
    let tagged = keys_on_each_primary("{t}:", &slots).unwrap();
    assert_eq!(tagged.len(), 1, "{tagged:?}");
    assert_eq!(cluster_slot(tagged[0].as_bytes()), cluster_slot(b"t"));
    assert!(keys_on_each_primary("p:", &Value::Int(1)).is_err());
    assert!(keys_on_each_primary("p:", &Value::Array(vec![range(5, 16_384, 1)])).is_err());
}

/// Keys built from the markers' pieces, so that prefixes of one
/// another and spellings of the other layout's names are common.
fn key() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof!["ring:", "log:", "ring", "log", ":", "x", ""],
        0..4,
    )
    .prop_map(|parts| parts.concat())
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Ring), Just(Layout::SortedSet)]
}

proptest! {
    /// Two keys name one Redis key only if they are the same key in the
    /// same layout.
    /// `b` is drawn at random or from `a` with a marker put before it
    /// or taken off it, where collisions would be.
    #[test]
    fn names_are_one_to_one(
        a in key(),
        other in key(),
        derive in 0..5usize,
        la in layout(),
        lb in layout(),
    ) {
        let b = match derive {
            0 => format!("ring:{a}"),
            1 => format!("log:{a}"),
            2 => a.strip_prefix("ring:").unwrap_or(&other).to_owned(),
            3 => a.strip_prefix("log:").unwrap_or(&other).to_owned(),
            _ => other,
        };
        let (x, y) = (redis_name("p:", la, &a), redis_name("p:", lb, &b));
        prop_assert_eq!(x == y, (la, &a) == (lb, &b), "{:?} {:?} / {:?} {:?}", la, a, lb, b);
    }

    /// Any `CLUSTER SLOTS` answer, however malformed (bounds out of
    /// range or reversed, fields missing or of other types, ranges
    /// overlapping), is read without a panic; one that is read gives at
    /// most a key per primary, each in a slot whose last range names
    /// that primary, and one for every primary owning a slot when the
    /// prefix has no hash tag.
    #[test]
    fn any_cluster_slots_answer_is_read_safely(
        ranges in proptest::collection::vec(
            (
                prop_oneof![12 => 0..16_384i64, 1 => Just(-1i64), 1 => any::<i64>()],
                prop_oneof![4 => 0..64i64, 2 => 0..16_384i64, 1 => any::<i64>()],
                0..4i64,
                0..32u8,
            ),
            0..6,
        ),
        tagged in any::<bool>(),
    ) {
        use ::redis::Value;
        let answer = Value::Array(
            ranges
                .iter()
                .map(|&(start, len, primary, shape)| (start, start.wrapping_add(len), primary, shape))
                .map(|(start, end, primary, shape)| match shape {
                    0 => Value::Int(start),
                    1 => Value::Array(vec![Value::Int(start), Value::Int(end)]),
                    2 => Value::Array(vec![Value::Int(start), Value::Nil, Value::Int(primary)]),
                    _ => Value::Array(vec![Value::Int(start), Value::Int(end), Value::Int(primary)]),
                })
                .collect(),
        );
        let prefix = if tagged { "{t}p:" } else { "p:" };
        let Ok(keys) = keys_on_each_primary(prefix, &answer) else {
            return Ok(());
        };
        // Who owns each slot, as read: the last range over it.
        let mut owner = vec![None; 16_384];
        for &(start, len, primary, _) in &ranges {
            owner[start as usize..=(start + len) as usize].fill(Some(primary));
        }
        let mut owning: Vec<i64> = owner.iter().flatten().copied().collect();
        owning.sort_unstable();
        owning.dedup();
        let mut reached: Vec<i64> = keys
            .iter()
            .map(|key| owner[usize::from(cluster_slot(key.as_bytes()))].expect("an owned slot"))
            .collect();
        reached.sort_unstable();
        let all = reached.len();
        reached.dedup();
        prop_assert_eq!(reached.len(), all, "two keys on one primary: {:?}", keys);
        if !tagged {
            prop_assert_eq!(all, owning.len(), "{:?}", keys);
        }
    }
}

#[test]
fn plain_keys_keep_their_names() {
    assert_eq!(redis_name("p:", Layout::SortedSet, "user42"), "p:user42");
    assert_eq!(redis_name("p:", Layout::Ring, "user42"), "p:ring:user42");
    assert_eq!(
        redis_name("p:", Layout::SortedSet, "ring:u"),
        "p:log:ring:u"
    );
    assert_eq!(redis_name("p:", Layout::Ring, "ring:u"), "p:ring:ring:u");
}

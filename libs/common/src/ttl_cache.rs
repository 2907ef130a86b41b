//! A small concurrent map whose entries expire: API-key lookups, resolved settings.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries live for the TTL given at insert time; expired entries are dropped on read and
/// swept when the map grows past `capacity`.
pub struct TtlCache<K, V> {
    inner: Mutex<HashMap<K, (Instant, V)>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            inner: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                map.remove(key);
                None
            }
            None => None,
        }
    }

    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity {
            let now = Instant::now();
            map.retain(|_, (expires, _)| *expires > now);
            if map.len() >= self.capacity {
                map.clear();
            }
        }
        map.insert(key, (Instant::now() + ttl, value));
    }

    pub fn clear(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire() {
        let cache = TtlCache::new(8);
        cache.insert("a", 1, Duration::from_millis(20));
        cache.insert("b", 2, Duration::from_secs(60));
        assert_eq!(cache.get(&"a"), Some(1));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(cache.get(&"a"), None);
        assert_eq!(cache.get(&"b"), Some(2));
    }

    #[test]
    fn capacity_is_bounded() {
        let cache = TtlCache::new(4);
        for i in 0..100 {
            cache.insert(i, i, Duration::from_secs(60));
        }
        assert!(cache.inner.lock().unwrap().len() <= 4);
        assert_eq!(cache.get(&99), Some(99));
    }
}

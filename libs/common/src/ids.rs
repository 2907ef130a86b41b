//! Identifiers. Every id docchat makes is a UUIDv7: time-ordered, so new rows land at the
//! end of their index and ids sort by creation, with 74 random bits after the clock.
//! `Uuid::new_v4` is banned in clippy.toml so that these stay the one way to make one.
//! Nothing here is a secret: keys and tokens come from the system's random source.

use uuid::Uuid;

/// A new id, hyphenated (`0192f6c2-8a1e-7c3d-...`): rows, jobs, events, messages.
pub fn new_id() -> String {
    Uuid::now_v7().to_string()
}

/// A new id without hyphens, for file and directory names.
pub fn new_name() -> String {
    Uuid::now_v7().simple().to_string()
}

/// Eight random hex characters (a v7's random tail, not its clock): tells apart replicas
/// that start in the same millisecond.
pub fn short() -> String {
    let name = new_name();
    name[name.len() - 8..].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_creation_and_shorts_differ() {
        let ids: Vec<String> = (0..64).map(|_| new_id()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "v7 ids sort in the order they were made");
        assert_eq!(Uuid::parse_str(&ids[0]).unwrap().get_version_num(), 7);
        let shorts: std::collections::HashSet<String> = (0..64).map(|_| short()).collect();
        assert_eq!(
            shorts.len(),
            64,
            "the random tail, not the shared clock prefix"
        );
        assert!(new_name().chars().all(|c| c.is_ascii_hexdigit()));
    }
}

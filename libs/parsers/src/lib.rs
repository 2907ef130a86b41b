//! Document parsers and chunking (being written).

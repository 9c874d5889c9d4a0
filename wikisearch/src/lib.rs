//! Accumulo's Wikipedia search (issue 16) on ht.

//! Property tests: the stripper and the tokenizer never panic, finish quickly
//! on any input, and tokens have the promised shape.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::{normalize_word, strip_wikitext, term_set, tokens};

/// Strings built from markup characters, letters and newlines: the inputs
/// that exercise every branch of the stripper.
fn markup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(vec![
            "{", "}", "[", "]", "|", "<", ">", "'", "=", "&", "#", "*", ":", ";", "_", "-", "!", "/", "\n", " ",
            "{{", "}}", "[[", "]]", "{|", "|}", "''", "'''", "==", "<!--", "-->", "__", "&amp;", "&#", "&#x",
            "<ref>", "</ref>", "<ref name=a/>", "<nowiki>", "</nowiki>", "<math>", "</math>", "<b>", "</b>",
            "<br/>", "[http://x ", "[[File:", "[[de:", "[[:", "__TOC__", ";",
        ]).prop_map(str::to_owned),
        1 => "[a-zA-Zäöü0-9]{1,4}",
        1 => "\\PC{1,3}",
    ];
    prop::collection::vec(piece, 0..300).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn strip_never_panics_on_markup(src in markup()) {
        let out = strip_wikitext(&src);
        // Markup only ever shrinks (entities decode to fewer bytes).
        prop_assert!(out.len() <= src.len() + 1, "{} -> {}", src.len(), out.len());
    }

    #[test]
    fn strip_never_panics_on_any_string(src in "\\PC{0,400}") {
        strip_wikitext(&src);
    }

}

proptest! {
    // Fewer cases: each builds tens of kilobytes.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn strip_is_fast_on_long_markup(pieces in prop::collection::vec(markup(), 30..40)) {
        // ~10-50 KB of dense markup; quadratic behaviour would show.
        let src = pieces.concat().repeat(4);
        let started = Instant::now();
        strip_wikitext(&src);
        prop_assert!(started.elapsed() < Duration::from_millis(500), "{} bytes took {:?}", src.len(), started.elapsed());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn tokens_are_alphanumeric_lowercase_and_stable(text in "\\PC{0,200}") {
        let toks = tokens(&text);
        for t in &toks {
            prop_assert!(!t.is_empty());
            prop_assert!(t.chars().all(char::is_alphanumeric), "{t:?}");
            prop_assert_eq!(&tokens(t), &vec![t.clone()], "token {:?} is not a fixed point", t);
            prop_assert_eq!(normalize_word(t), Some(t.clone()));
        }
        let set = term_set(&text);
        prop_assert!(set.iter().all(|t| toks.contains(t)));
        prop_assert!(toks.iter().all(|t| set.contains(t)));
    }

    #[test]
    fn tokens_of_stripped_markup(src in markup()) {
        let toks = tokens(&strip_wikitext(&src));
        prop_assert!(toks.iter().all(|t| t.chars().all(char::is_alphanumeric)));
    }
}

/// Every character of Unicode, alone and between letters: the folding is a
/// fixed point on its own tokens (lowercasing never produces something that
/// folds again). Cheaper and more thorough than sampling.
#[test]
fn folding_is_a_fixed_point_for_every_character() {
    let mut text = String::new();
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        text.push(c);
        text.push(' ');
    }
    for t in tokens(&text) {
        assert_eq!(
            tokens(&t),
            std::slice::from_ref(&t),
            "{:?}",
            t.chars().map(u32::from).collect::<Vec<_>>()
        );
    }
}

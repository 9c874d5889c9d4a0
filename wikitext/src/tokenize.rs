//! Cutting plain text into index terms: the rules are on [`tokens`].

use std::collections::BTreeSet;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Steps 1-3 of the rules on [`tokens`]: NFD, drop combining marks, lowercase. A fixed
/// point on its own output (lowercasing never yields a character that NFD
/// would decompose again): the test `folding_is_a_fixed_point_for_every_character`
/// checks this for all of Unicode.
fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.nfd().filter(|&c| !is_combining_mark(c)) {
        out.extend(c.to_lowercase());
    }
    out
}

/// The index terms of `text`, in order of appearance, duplicates kept.
///
/// The rules, in the order they are applied (the order matters: a letter is
/// folded *before* we decide where tokens end, so "Köln" is one token and not
/// "k" + "ln"):
///
/// 1. **Unicode NFD**: precomposed letters are decomposed into a base letter
///    plus combining marks ("ö" becomes "o" + U+0308).
/// 2. **Combining marks are dropped**
///    ([`unicode_normalization::char::is_combining_mark`]): "Köln" → "Koln",
///    "naïve café" → "naive cafe". Text that is already decomposed folds the
///    same way as precomposed text.
/// 3. **Lowercase** with [`char::to_lowercase`] (full Unicode, no locale):
///    "ΑΘΗΝΑ" → "αθηνα", "МОСКВА" → "москва". "ß" stays "ß" (it is already
///    lowercase; no case folding to "ss").
/// 4. **Split**: a token is a maximal run of characters for which
///    [`char::is_alphanumeric`] is true. Everything else separates tokens:
///    spaces, punctuation, apostrophes ("B-52's" → "b", "52", "s") and the
///    underscore (it is not alphanumeric: "foo_bar" → "foo", "bar"). Digits are
///    alphanumeric, so "1802" is a token. Letters without case (CJK, ...) are
///    alphanumeric, so a run of Han characters is a single token; fullwidth
///    Latin letters are kept as they are (lowercased: "ＡＢＣ" → "ａｂｃ").
///
/// No stemming and no stop words: "the" is a term like any other.
///
/// Every returned token is non-empty, consists only of alphanumeric
/// characters, and `tokens(t) == [t]` for each token `t`.
///
/// ```
/// assert_eq!(wikitext::tokens("Köln, B-52's"), ["koln", "b", "52", "s"]);
/// assert_eq!(wikitext::tokens("naïve café"), ["naive", "cafe"]);
/// ```
pub fn tokens(text: &str) -> Vec<String> {
    split_folded(&fold(text)).map(str::to_owned).collect()
}

/// The maximal runs of alphanumeric characters of folded text.
fn split_folded(folded: &str) -> impl Iterator<Item = &str> {
    folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
}

/// The distinct terms of `text` (by the rules of [`tokens`]), sorted: what an
/// article is indexed under.
pub fn term_set(text: &str) -> BTreeSet<String> {
    split_folded(&fold(text)).map(str::to_owned).collect()
}

/// Normalises one query word exactly as [`tokens`] normalises text, so that
/// "Köln" in a query finds articles that contain "koln" (or "Köln").
///
/// Returns `None` unless the whole word is a single token: empty words and
/// words with anything that is not alphanumeric after folding (punctuation,
/// spaces, "B-52") give `None`. Nothing is trimmed: the caller splits the
/// query first.
///
/// ```
/// assert_eq!(wikitext::normalize_word("Köln").as_deref(), Some("koln"));
/// assert_eq!(wikitext::normalize_word("B-52"), None);
/// ```
pub fn normalize_word(word: &str) -> Option<String> {
    let folded = fold(word);
    if !folded.is_empty() && folded.chars().all(char::is_alphanumeric) {
        Some(folded)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Vec<String> {
        tokens(s)
    }

    #[test]
    fn examples_from_the_spec() {
        assert_eq!(t("Köln"), ["koln"]);
        assert_eq!(t("Straße"), ["straße"]);
        assert_eq!(t("naïve café"), ["naive", "cafe"]);
        assert_eq!(t("B-52's"), ["b", "52", "s"]);
        assert_eq!(t("ＡＢＣ"), ["ａｂｃ"]);
        assert_eq!(t("東京都 は"), ["東京都", "は"]);
    }

    #[test]
    fn digits_underscores_apostrophes() {
        assert_eq!(t("In 1802, 3.14"), ["in", "1802", "3", "14"]);
        assert_eq!(t("foo_bar __TOC__"), ["foo", "bar", "toc"]);
        assert_eq!(t("don't l’Europe"), ["don", "t", "l", "europe"]);
        // Superscript and other numeric characters are alphanumeric too.
        assert_eq!(t("x² ½"), ["x²", "½"]);
    }

    #[test]
    fn decomposed_input_folds_like_precomposed() {
        let decomposed = "Ko\u{308}ln cafe\u{301}";
        assert_eq!(t(decomposed), ["koln", "cafe"]);
        assert_eq!(t(decomposed), t("Köln café"));
        // A lone combining mark is not a token.
        assert!(t("\u{301}").is_empty());
    }

    #[test]
    fn greek_and_cyrillic_uppercase() {
        assert_eq!(t("ΑΘΗΝΑ Ἀθῆναι"), ["αθηνα", "αθηναι"]);
        assert_eq!(t("МОСКВА Ёлка"), ["москва", "елка"]);
        // Final sigma: to_lowercase has no context, so Σ is always σ.
        assert_eq!(t("ΟΔΟΣ"), ["οδοσ"]);
    }

    #[test]
    fn dotted_capital_i_and_ligatures() {
        // NFD splits İ into I + U+0307 first, so the dot is dropped before
        // lowercasing, and İstanbul matches Istanbul.
        assert_eq!(t("İstanbul"), ["istanbul"]);
        assert_eq!(t("ẞ"), ["ß"]);
        assert_eq!(t("Æsir Ørsted"), ["æsir", "ørsted"]);
    }

    #[test]
    fn empty_and_separator_only() {
        assert!(t("").is_empty());
        assert!(t("  -- ,;'!? \n\t").is_empty());
    }

    #[test]
    fn term_set_is_sorted_and_distinct() {
        let set = term_set("the cat and THE hat and the Cat");
        let v: Vec<&str> = set.iter().map(String::as_str).collect();
        assert_eq!(v, ["and", "cat", "hat", "the"]);
    }

    #[test]
    fn normalize_word_rules() {
        assert_eq!(normalize_word("Köln").as_deref(), Some("koln"));
        assert_eq!(normalize_word("STRASSE").as_deref(), Some("strasse"));
        assert_eq!(normalize_word("Straße").as_deref(), Some("straße"));
        assert_eq!(normalize_word("1802").as_deref(), Some("1802"));
        assert_eq!(normalize_word("東京"), Some("東京".to_owned()));
        assert_eq!(normalize_word(""), None);
        assert_eq!(normalize_word("B-52"), None);
        assert_eq!(normalize_word("it's"), None);
        assert_eq!(normalize_word(" koln"), None);
        assert_eq!(normalize_word("foo_bar"), None);
        // A word of combining marks only folds to nothing.
        assert_eq!(normalize_word("\u{308}"), None);
    }

    #[test]
    fn normalize_word_agrees_with_tokens() {
        for w in ["Köln", "ΑΘΗΝΑ", "İstanbul", "Ｗｉｋｉ", "café"] {
            let n = normalize_word(w);
            assert_eq!(n.map(|n| vec![n]), Some(tokens(w)), "{w}");
        }
    }
}

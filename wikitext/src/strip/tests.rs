//! Tests of the stripper, pass by pass and whole.

use super::entities::ENTITIES;
use super::*;

fn s(src: &str) -> String {
    strip_wikitext(src)
}

#[test]
fn templates_nested_and_params() {
    assert_eq!(s("a {{b|c={{d|e}}|f}} g"), "a g");
    assert_eq!(s("a{{{1|default}}}b"), "ab");
    assert_eq!(s("x {{a|{{{1|{{b}}}}}}} y"), "x y");
    assert_eq!(
        s("{{Infobox person\n| name = Zed\n| born = 1900\n}}\nBody text."),
        "Body text."
    );
    // Unclosed: kept as text, so the article is not eaten.
    assert_eq!(s("a {{b c"), "a {{b c");
    assert_eq!(s("a }} b"), "a }} b");
    assert_eq!(s("a {{b {{c}} d"), "a {{b d");
}

#[test]
fn tables() {
    assert_eq!(
        s("before\n{| class=\"wikitable\"\n|-\n! H\n|-\n| cell || cell2\n|}\nafter"),
        "before\n\nafter"
    );
    // Nested table and a template inside a cell.
    assert_eq!(
        s("a\n{|\n| {{flag|X}}\n|\n{|\n| inner\n|}\n|}\nb"),
        "a\n\nb"
    );
    // `{|` not at the start of a line is not a table.
    assert_eq!(s("x {| y"), "x {| y");
    // A table inside a template parameter.
    assert_eq!(s("a {{t|x=\n{|\n| c\n|}\n}} b"), "a b");
}

#[test]
fn refs_and_dropped_tags() {
    assert_eq!(
        s("Fact.<ref name=\"a\">{{cite web|url=http://x|title=T}}</ref> More."),
        "Fact. More."
    );
    assert_eq!(
        s("Fact.<ref name=\"a\" /> More.<ref name=b/>"),
        "Fact. More."
    );
    assert_eq!(s("A<REF>x</Ref >B"), "AB");
    assert_eq!(s("Area <math>\\pi r^2</math> of"), "Area of");
    assert_eq!(s("x<gallery>\nFile:a.jpg|cap\n</gallery>y"), "xy");
    assert_eq!(
        s("==Refs==\n<references>\n<ref name=a>r</ref>\n</references>\nend"),
        "Refs\n\nend"
    );
    // `</references>` does not close a `<ref>`.
    assert_eq!(s("a<ref>r1</references>r2</ref>b"), "ab");
    // Only `</ref>` closes: a mistyped `</ref name="x">` does not.
    assert_eq!(s("a<ref>r1</ref name=\"x\"> r2</ref>b"), "ab");
    assert_eq!(s("a<ref>r1</ref\n>b"), "ab");
    // An unclosed ref drops only the tag.
    assert_eq!(s("a <ref>b"), "a b");
}

#[test]
fn comments() {
    assert_eq!(s("a<!-- hidden -->b"), "ab");
    assert_eq!(s("a<!-- x\n{{y}}\n-->b <!-- unclosed"), "ab");
}

#[test]
fn inline_and_block_tags() {
    assert_eq!(
        s("H<sub>2</sub>O is <b>bold</b> <span style=\"x\">s</span>"),
        "H2O is bold s"
    );
    assert_eq!(
        s("one<br/>two<br>three<div class=\"x\">four</div>"),
        "one two three four"
    );
    // `<` that is not a tag is text.
    assert_eq!(s("1 < 2 and 3<4 > 2"), "1 < 2 and 3<4 > 2");
}

#[test]
fn nowiki_is_literal() {
    assert_eq!(
        s("<nowiki>{{not a template}} [[x]] ''q''</nowiki>"),
        "{{not a template}} [[x]] ''q''"
    );
    assert_eq!(s("a<nowiki/>b"), "ab");
    assert_eq!(s("<nowiki>&amp;</nowiki> &amp;"), "&amp; &");
    assert_eq!(s("<pre>x = 1;</pre>"), "x = 1;");
}

#[test]
fn internal_links() {
    assert_eq!(s("[[target|label]] and [[Target]]s"), "label and Targets");
    assert_eq!(s("[[New_York_City]]"), "New York City");
    assert_eq!(s("[[File:X.jpg|thumb|A [[caption]] here]] after"), "after");
    assert_eq!(
        s("[[Image:X.png|left]][[Datei:Y.jpg|mini|Köln]][[Bild:Z.jpg]]z"),
        "z"
    );
    assert_eq!(s("x[[Category:Things| ]][[Kategorie:Dinge]]"), "x");
    assert_eq!(
        s("a [[de:Köln]][[fr:Cologne]][[zh-yue:x]][[simple:Y]] b"),
        "a b"
    );
    assert_eq!(
        s("[[:Category:Things]] [[:de:Köln|Köln]]"),
        "Category:Things Köln"
    );
    assert_eq!(
        s("[[wikt:word|word]] [[Star Wars: Episode I]]"),
        "word Star Wars: Episode I"
    );
    // Unclosed stays.
    assert_eq!(s("a [[b c"), "a [[b c");
    assert_eq!(s("a ]] b"), "a ]] b");
}

#[test]
fn external_links() {
    assert_eq!(
        s("See [http://example.org the site] now."),
        "See the site now."
    );
    assert_eq!(s("Bare [https://example.org/x?y=1] link."), "Bare link.");
    assert_eq!(s("[//example.org proto-relative]"), "proto-relative");
    // An internal link inside the label does not end the external link.
    assert_eq!(
        s(
            "[http://x.org/talk \"T\" (at [[University of California, Berkeley|UC Berkeley]], 1962)] z"
        ),
        "\"T\" (at UC Berkeley, 1962) z"
    );
    // Not a URL, or no `]` on the line: text.
    assert_eq!(s("[sic] and [http://x\n]"), "[sic] and [http://x\n]");
}

#[test]
fn emphasis_headings_lists() {
    assert_eq!(
        s("'''Bold''' and ''italic'' and '''''both'''''"),
        "Bold and italic and both"
    );
    assert_eq!(s("l''''a''''"), "l'a'");
    assert_eq!(s("it's"), "it's");
    assert_eq!(
        s("== History ==\ntext\n=== Early years===\nmore"),
        "History\ntext\nEarly years\nmore"
    );
    assert_eq!(
        s("* one\n** two\n# three\n#: four\n; term : def\n: indented"),
        "one\ntwo\nthree\nfour\nterm : def\nindented"
    );
    assert_eq!(s("a\n----\nb"), "a\n\nb");
}

#[test]
fn magic_words() {
    assert_eq!(
        s("__TOC__\nText __NOTOC__ more__NOEDITSECTION__"),
        "Text more"
    );
    assert_eq!(s("__KEIN_INHALTSVERZEICHNIS__ x"), "x");
    assert_eq!(
        s("snake_case and __init__ and ____"),
        "snake_case and __init__ and ____"
    );
}

#[test]
fn entities() {
    assert_eq!(s("a &amp; b &lt;c&gt; &quot;d&quot;"), "a & b <c> \"d\"");
    assert_eq!(s("1&nbsp;km 1990&ndash;91 a&mdash;b"), "1 km 1990–91 a—b");
    assert_eq!(s("&#123;&#x1F600;&#X41;"), "{😀A");
    assert_eq!(s("&#123;&#123;x}}"), "{{x}}");
    assert_eq!(s("&bogus; &#xZZ; &#0; & ;"), "&bogus; &#xZZ; &#0; & ;");
    assert_eq!(s("Kon&shy;rad"), "Konrad");
    assert_eq!(
        s("&eta;2 &Psi; &fnof; &auml;&szlig; &hellip;"),
        "η2 Ψ ƒ äß …"
    );
    // Entity names are case-sensitive.
    assert_eq!(s("&Amp; &AMP;"), "&Amp; &AMP;");
}

#[test]
fn entity_table_is_sorted() {
    assert!(ENTITIES.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn whitespace_is_tidied() {
    assert_eq!(s("  a   b \n\n\n\n c\t d  "), "a b\n\nc d");
    assert_eq!(s(""), "");
}

#[test]
fn adversarial_inputs_are_fast() {
    let n = 200_000;
    let inputs = [
        "{{".repeat(n),
        "}}".repeat(n),
        "[[".repeat(n),
        "]]".repeat(n),
        "{{[[".repeat(n / 2),
        "<ref>".repeat(n / 2),
        "<nowiki>".repeat(n / 2),
        "<!--".repeat(n / 2),
        "<a ".repeat(n / 2),
        "[http://x ".repeat(n / 4),
        "&#1234".repeat(n / 2),
        "_A".repeat(n),
        "'".repeat(n),
        "\n{|".repeat(n / 2),
        "{{{{{{}}}}}|}[[]]<br/><!---->".repeat(n / 16),
    ];
    let started = std::time::Instant::now();
    for input in &inputs {
        let out = strip_wikitext(input);
        assert!(out.len() <= input.len() * 2, "output grew beyond the input");
    }
    // Quadratic behaviour on any of these would take minutes.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(strip_wikitext(&"[[".repeat(10)), "[[".repeat(10));
    assert_eq!(strip_wikitext("[[[[x]]]]"), "x");
}

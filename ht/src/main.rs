//! The stock `ht` binary: the command line with the built-in iterator and combiner kinds.

fn main() -> anyhow::Result<()> {
    ht::main_with(ht::Registry::builtins())
}

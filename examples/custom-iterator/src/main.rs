//! `my-ht`: the stock `ht` command line plus the `value_len_at_least` iterator kind.

use custom_iterator::ValueLenAtLeast;
use ht::Registry;

fn main() -> anyhow::Result<()> {
    let mut registry = Registry::builtins();
    registry.register_iterator(ValueLenAtLeast)?;
    ht::main_with(registry)
}

//! Parses each argument as a statement and prints the AST and canonical form (a debugging aid).

fn main() {
    for arg in std::env::args().skip(1) {
        match hql::parse_statement(&arg) {
            Ok(s) => println!("{s:?}\n{s}\n"),
            Err(e) => println!("{e}\n"),
        }
    }
}

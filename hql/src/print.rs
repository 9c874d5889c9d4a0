//! Printing the AST as canonical HQL.

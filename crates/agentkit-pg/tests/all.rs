//! The PostgreSQL backend against a real server (a throwaway database per
//! test; skipped with a message when no server is reachable outside CI).

mod suite;

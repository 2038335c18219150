//! The server side of a run: the managed throwaway server (find the binary,
//! init, start, stop), an existing server's pid, and its status counters.
pub mod commits;
pub mod existing;
pub mod locate;
pub mod managed;
pub mod options;
pub mod process;
pub mod sizing;
pub mod status;

//! The server side of a run: the managed throwaway server (find the binary,
//! init, start, stop), an existing server's pid, and its status counters.
pub mod commits;
pub mod delay_proxy;
pub mod existing;
pub mod group;
pub mod group_end;
pub mod group_layout;
pub mod locate;
pub mod managed;
pub mod process;
pub mod replica;
pub mod sizing;
pub mod status;
pub mod template;
pub mod throttle;

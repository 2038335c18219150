//! The traced server process. (The managed throwaway server lands here too.)
pub mod process;

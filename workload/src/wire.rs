//! The update workload's hot path on the connection's own socket: one
//! `COM_STMT_EXECUTE` of a prepared statement with one integer
//! parameter, then its OK or ERR packet — waiting for the reply with
//! `poll(POLLIN)`, as libmysqlclient does.
//!
//! Why not the `mysql` crate's `exec_drop`: it waits in a blocking
//! `recv`, and on a unix socket that wait is woken twice per statement —
//! once when the server *reads* the request (the kernel signals write
//! space on the same wait queue) and once for the reply. The first
//! wake-up is a context switch onto the server's CPU just as the server
//! starts the statement: at one client that was 2 voluntary context
//! switches per transaction against sysbench's 1, and ~10 % of its tps
//! (`cargo xtask bench workload`). `poll` registers for input only, and
//! write-space wake-ups pass it by.
use std::{io, os::fd::RawFd};

/// How an execution ended, short of success.
#[derive(Debug)]
pub enum WireError {
    /// An ERR packet: the server's code and message.
    Server { code: u16, message: String },
    /// The connection is gone (or spoke something else).
    Io(io::Error),
}

const COM_STMT_EXECUTE: u8 = 0x17;
const MYSQL_TYPE_LONG: u8 = 0x03;
const UNSIGNED: u8 = 0x80;

/// The request packet: header (length, sequence 0) and payload.
fn request(stmt_id: u32, v: u32) -> [u8; 4 + 18] {
    let mut p = [0u8; 22];
    p[0] = 18; // payload length, little endian (3 bytes), then sequence 0
    p[4] = COM_STMT_EXECUTE;
    p[5..9].copy_from_slice(&stmt_id.to_le_bytes());
    p[9] = 0; // no cursor
    p[10..14].copy_from_slice(&1u32.to_le_bytes()); // iteration count
    p[14] = 0; // NULL bitmap of the one parameter
    p[15] = 1; // types follow
    p[16] = MYSQL_TYPE_LONG;
    p[17] = UNSIGNED;
    p[18..22].copy_from_slice(&v.to_le_bytes());
    p
}

fn send_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: a valid buffer of buf.len() bytes on an open fd.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes, polling for input before each read.
fn recv_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: the unfilled part of buf, on an open fd.
        let n = unsafe {
            libc::recv(
                fd,
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
                libc::MSG_DONTWAIT,
            )
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
            ) {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(())
}

/// Executes prepared statement `stmt_id` with the one parameter `v` on
/// the connection whose socket is `fd`, and reads its reply (an OK or ERR
/// packet: the statement must return no rows).
pub fn exec_u32(fd: RawFd, stmt_id: u32, v: u32) -> Result<(), WireError> {
    send_all(fd, &request(stmt_id, v)).map_err(WireError::Io)?;
    let mut head = [0u8; 4];
    recv_exact(fd, &mut head).map_err(WireError::Io)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut body = vec![0u8; len];
    recv_exact(fd, &mut body).map_err(WireError::Io)?;
    match body.first() {
        Some(0x00) => Ok(()),
        Some(0xff) if body.len() >= 3 => {
            let code = u16::from_le_bytes([body[1], body[2]]);
            // '#' and a five-character SQLSTATE precede the message.
            let rest = if body.get(3) == Some(&b'#') && body.len() >= 9 {
                &body[9..]
            } else {
                &body[3..]
            };
            Err(WireError::Server {
                code,
                message: String::from_utf8_lossy(rest).into_owned(),
            })
        }
        _ => Err(WireError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected reply to a statement that returns no rows",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_what_the_mysql_crate_sends_but_with_a_4_byte_int() {
        let p = request(6, 0x14b7);
        assert_eq!(
            p,
            [18, 0, 0, 0, 0x17, 6, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 0x80, 0xb7, 0x14, 0, 0]
        );
    }
}

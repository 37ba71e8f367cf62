// SO_LINGER {1, 0}: the close that resets.
//
// A program's setsockopt(SO_LINGER) goes to the connection's TCP socket
// (the interposer and the explicit API pass it through), so a transport
// that carries the stream elsewhere asks that socket at its last close
// whether the close must be a reset, as kernel TCP's would be: the peer
// then reads what arrived, then ECONNRESET.
#ifndef VSOCKET_VSOCKET_LINGER_ABORT_H_
#define VSOCKET_VSOCKET_LINGER_ABORT_H_

namespace vsocket {

// True when `tcp_fd` has SO_LINGER on with a zero timeout.  One getsockopt;
// false for -1 or on any error.  Any thread.
bool LingerAbortsClose(int tcp_fd);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_LINGER_ABORT_H_

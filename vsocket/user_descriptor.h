// The two descriptor moves every fast-path transport makes when it takes a
// connection over from kernel TCP, written once.  The application keeps its
// descriptor number; after the move it names the transport's user
// descriptor (a wait socket whose readiness follows the rings), and the
// kernel TCP socket lives on at a private number the transport owns.
//
// Threading: any thread; callers serialise moves of one number themselves
// (path selection runs inside the connect or accept of that socket).
#ifndef VSOCKET_VSOCKET_USER_DESCRIPTOR_H_
#define VSOCKET_VSOCKET_USER_DESCRIPTOR_H_

namespace vsocket {

// A close-on-exec duplicate of `fd` in the private range (or anywhere when
// that range is full).  The caller owns it.  -1 with errno.
int DuplicateAside(int fd);

// Puts `from` at number `user_fd` with dup3, keeping user_fd's
// close-on-exec flag, then closes `from`.  0, or -1 with errno (then
// `from` is still open and `user_fd` unchanged).
int InstallAtUserNumber(int from, int user_fd);

}  // namespace vsocket

#endif  // VSOCKET_VSOCKET_USER_DESCRIPTOR_H_

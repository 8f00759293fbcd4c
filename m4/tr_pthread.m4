# AX_PTHREAD_SIMPLE
# -----------------
# POSIX threads on glibc: -pthread for compiling and linking.
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  PTHREAD_CFLAGS=-pthread
  tr_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -pthread"
  AC_CHECK_FUNC([pthread_create], [],
    [AC_MSG_ERROR([POSIX threads are required])])
  CFLAGS=$tr_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS])
])

#! type socket
#! kernel reject "R0 !read_ok"
#! rule r0-exit
#! note set on one path only
ldxw %r2, [%r1+0]
jeq %r2, 0, done
mov %r0, 1
done:
exit

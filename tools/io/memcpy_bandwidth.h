// The machine's memory bandwidth as one thread's memcpy sees it, the yardstick `kiln bench
// --profile` puts beside the generated kernels' GB/s (a fused elementwise region moves its bytes
// as a copy does; issue 42's goal is half of this or more).
#pragma once

namespace kiln::io {

// GB/s (10^9 bytes per second) of the fastest of a few memcpy calls on the calling thread,
// counting the bytes read and the bytes written, as the profile counts a program's: 2 x 64 MiB
// per call, over the size of any last-level cache. Takes about 50 ms. 0 when the buffers
// cannot be allocated.
double MemcpyGBps();

}  // namespace kiln::io

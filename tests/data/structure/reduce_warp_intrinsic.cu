// EXPECT access global load flags coalesced
// EXPECT access global store counts broadcast
// EXPECT feature warp_reduce 1
// EXPECT feature warp_vote 1
__global__ void count_flags(const int* flags, unsigned* counts) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int f = flags[i];
    unsigned mask = __ballot_sync(0xffffffffu, f != 0);
    unsigned total = __reduce_add_sync(0xffffffffu, (unsigned)f);
    if ((threadIdx.x & 31) == 0) counts[i / 32] = total + __popc(mask);
}

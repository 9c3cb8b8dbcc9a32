// Does the way a child process maps the evaluator's buffers change a kernel's speed?
//
//   nvcc -O2 -arch=sm_90 -o /tmp/ipc_mapping benchmarks/experiments/ipc_mapping.cu -lcuda && [ODD_SIZE=1] /tmp/ipc_mapping
//
// A parent process allocates K slots of buffers twice: with cuMemAlloc (exported as a legacy CUDA IPC
// handle, as the evaluator does today) and with the virtual memory API (cuMemCreate at the recommended
// granularity, exported as a POSIX file descriptor). It times, in itself and then in a child it starts,
// batches of one call per slot (rotation) and of K calls on slot 0, after an L2 flush, with CUDA events:
// for an elementwise kernel and for row kernels that read each row twice (rmsnorm's shape). The child
// also copies the data into an allocation of its own and times that. One JSON line per figure.
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, s_); exit(2); } } while (0)

static const int K = 8;
static const size_t FLUSH = 256ull << 20;

__global__ void fill(float* p, size_t n, float seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = seed + (float)(i % 977) * 1e-3f;
}

__global__ void scale(const float4* x, float4* y, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n4) { float4 v = x[i]; y[i] = make_float4(v.x * 2.f, v.y * 2.f, v.z * 2.f, v.w * 2.f); }
}

__global__ void rownorm(const float4* x, float4* y, int cols4) {
  __shared__ float part[256];
  const float4* row = x + (size_t)blockIdx.x * cols4;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols4; c += blockDim.x) { float4 v = row[c]; s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) { if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w]; __syncthreads(); }
  float inv = rsqrtf(part[0] / (cols4 * 4) + 1e-6f);
  for (int c = threadIdx.x; c < cols4; c += blockDim.x) {
    float4 v = row[c];
    y[(size_t)blockIdx.x * cols4 + c] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
}

struct Shape { const char* name; int rows, cols; };
static const Shape SHAPES[] = {{"4096x4096", 4096, 4096}, {"16384x1024", 16384, 1024}, {"2048x8192", 2048, 8192}};

static size_t slot_bytes(const Shape& s) { return 2ull * s.rows * s.cols * sizeof(float); }  // in + out
static size_t max_slot_bytes() { size_t m = 0; for (auto& s : SHAPES) m = std::max(m, slot_bytes(s)); return m; }

static CUdeviceptr flush_buf;

static float batch_ms(CUdeviceptr base, const Shape& sh, const std::vector<int>& slots, bool row) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  size_t n = (size_t)sh.rows * sh.cols, stride = max_slot_bytes();
  CK(cuMemsetD8Async(flush_buf, 1, FLUSH, 0));
  cudaEventRecord(a);
  for (int s : slots) {
    float4* x = (float4*)(base + s * stride);
    float4* y = (float4*)(base + s * stride + n * sizeof(float));
    if (row) rownorm<<<sh.rows, 256>>>(x, y, sh.cols / 4);
    else scale<<<(unsigned)((n / 4 + 255) / 256), 256>>>(x, y, n / 4);
  }
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a); cudaEventDestroy(b);
  return ms / slots.size();
}

static void report(const char* side, const char* memory, CUdeviceptr base) {
  std::vector<int> rot, same(K, 0), last(K, K - 1);
  for (int s = 0; s < K; ++s) rot.push_back(s);
  for (auto& sh : SHAPES)
    for (int row = 0; row < 2; ++row)
      for (auto& [what, slots] : std::vector<std::pair<const char*, std::vector<int>*>>{{"rotate", &rot}, {"same", &same}, {"same_last", &last}}) {
        batch_ms(base, sh, *slots, row);  // warm
        std::vector<float> t;
        for (int i = 0; i < 15; ++i) t.push_back(batch_ms(base, sh, *slots, row));
        std::sort(t.begin(), t.end());
        printf("{\"side\": \"%s\", \"memory\": \"%s\", \"shape\": \"%s\", \"kernel\": \"%s\", \"batch\": \"%s\", \"ms_per_call\": %.5f}\n",
               side, memory, sh.name, row ? "rownorm" : "scale", what, t[t.size() / 2]);
        fflush(stdout);
      }
}

static void setup(CUcontext* ctx) {
  CUdevice dev;
  CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(ctx, dev)); CK(cuCtxSetCurrent(*ctx));
  CK(cuMemAlloc(&flush_buf, FLUSH));
}

static CUmemAllocationProp vmm_prop() {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

static CUdeviceptr vmm_map(CUmemGenericAllocationHandle h, size_t size) {
  CUdeviceptr p;
  CK(cuMemAddressReserve(&p, size, 2ull << 20, 0, 0));
  CK(cuMemMap(p, size, 0, h, 0));
  CUmemAccessDesc d = {};
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE; d.location.id = 0; d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(p, size, &d, 1));
  return p;
}

int main(int argc, char** argv) {
  CUcontext ctx;
  setup(&ctx);
  bool odd = getenv("ODD_SIZE") && atoi(getenv("ODD_SIZE"));
  size_t total = K * max_slot_bytes() + (odd ? 512 : 0);  // odd: not a multiple of the 2 MiB page
  if (argc > 1 && std::string(argv[1]) == "child") {
    CUipcMemHandle ih;
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; ++i) sscanf(argv[2] + 2 * i, "%2hhx", &ih.reserved[i]);
    CUdeviceptr ipc;
    CK(cuIpcOpenMemHandle(&ipc, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("{\"side\": \"child\", \"bytes\": %zu, \"ipc_base_mod_2MiB\": %llu}\n", total, (unsigned long long)(ipc % (2ull << 20)));
    CUdeviceptr own;
    CK(cuMemAlloc(&own, total));
    CK(cuMemcpyDtoD(own, ipc, total));
    report("child", "ipc_cuMemAlloc", ipc);
    report("child", "own_cuMemAlloc", own);
    int fd = atoi(argv[3]);
    CUmemGenericAllocationHandle h;
    CK(cuMemImportFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    size_t gran;
    CUmemAllocationProp prop = vmm_prop();
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    size_t vsize = (total + gran - 1) / gran * gran;
    CUdeviceptr vmm = vmm_map(h, vsize);
    report("child", "vmm_fd", vmm);
    return 0;
  }
  CUdeviceptr legacy;
  CK(cuMemAlloc(&legacy, total));
  fill<<<1024, 256>>>((float*)legacy, total / 4, 1.f);
  CUmemAllocationProp prop = vmm_prop();
  size_t gran;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  size_t vsize = (total + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, vsize, &prop, 0));
  CUdeviceptr vmm = vmm_map(h, vsize);
  fill<<<1024, 256>>>((float*)vmm, total / 4, 1.f);
  CK(cuCtxSynchronize());
  printf("{\"side\": \"parent\", \"bytes\": %zu, \"base_mod_2MiB\": %llu}\n", total, (unsigned long long)(legacy % (2ull << 20)));
  report("parent", "cuMemAlloc", legacy);
  report("parent", "vmm", vmm);
  CUipcMemHandle ih;
  CK(cuIpcGetMemHandle(&ih, legacy));
  char hex[2 * CU_IPC_HANDLE_SIZE + 1];
  for (int i = 0; i < CU_IPC_HANDLE_SIZE; ++i) sprintf(hex + 2 * i, "%02x", (unsigned char)ih.reserved[i]);
  int fd;
  CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  fcntl(fd, F_SETFD, 0);  // the child inherits it
  std::string fds = std::to_string(fd);
  char* cargv[] = {argv[0], (char*)"child", hex, (char*)fds.c_str(), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, cargv, environ) != 0) { perror("posix_spawn"); return 2; }
  int status = 0;
  waitpid(pid, &status, 0);
  return WEXITSTATUS(status);
}

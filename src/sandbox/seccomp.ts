/**
 * The seccomp filter every confined run starts under (bubblewrap's `--seccomp FD`): it refuses
 * the kernel keyring calls (`add_key`, `request_key`, `keyctl`) with ENOSYS. Namespaces do not
 * separate keyrings: a sandboxed process keeps the session keyring of the process that started
 * it, so without the filter an agent could read every key in the node's session keyring (Kerberos
 * tickets, tokens a tool put there) and fill its user's key quota. ENOSYS is what a kernel built
 * without keys answers, which tools already take as "no keyring here".
 *
 * The program is classic BPF (struct sock_filter, 8 bytes each, in the machine's byte order),
 * built here for the node's own architecture and the 32-bit one its kernel also runs (x86: i386 and
 * x32; arm64: arm). A process of another architecture is let through: the kernel runs none here.
 */
import { arch } from "node:process";
import { endianness } from "node:os";

/** The calls refused, by name (what the isolation profile records). */
export const DENIED_SYSCALLS = ["add_key", "keyctl", "request_key"] as const;
export const DENIED_ERRNO = "ENOSYS";
const ENOSYS = 38;

// linux/filter.h, linux/seccomp.h, linux/audit.h
const BPF_LD_W_ABS = 0x20;
const BPF_JMP_JEQ_K = 0x15;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
/** offsetof(struct seccomp_data, nr) and (…, arch) */
const NR = 0;
const ARCH = 4;

/** An audit architecture and its numbers of add_key, request_key and keyctl. */
interface ArchCalls {
  readonly arch: number;
  readonly calls: readonly number[];
}

const X32 = 0x40000000;
const CALLS: Readonly<Record<string, readonly ArchCalls[]>> = {
  x64: [
    { arch: 0xc000003e, calls: [248, 249, 250, X32 + 248, X32 + 249, X32 + 250] }, // x86_64 and x32
    { arch: 0x40000003, calls: [286, 287, 288] }, // i386
  ],
  arm64: [
    { arch: 0xc00000b7, calls: [217, 218, 219] }, // aarch64
    { arch: 0x40000028, calls: [309, 310, 311] }, // arm
  ],
};

interface Insn {
  readonly code: number;
  readonly k: number;
  /** jump targets (instruction indexes) of a conditional jump */
  readonly jt?: number;
  readonly jf?: number;
}

const built = new Map<string, Buffer | undefined>();

/**
 * The filter for this machine's architecture; undefined where warden does not know its call
 * numbers. Built once per architecture: every confined run and the probe ask for it.
 */
export function keyringFilter(machine: string = arch): Buffer | undefined {
  if (!built.has(machine)) built.set(machine, buildFilter(machine));
  return built.get(machine);
}

function buildFilter(machine: string): Buffer | undefined {
  const arches = CALLS[machine];
  if (arches === undefined) return undefined;
  // Layout: load arch; one test per architecture; allow; then per architecture a block that loads
  // the call number, tests each denied call and allows; last, the one refusal.
  const blockStart: number[] = [];
  let at = 1 + arches.length + 1;
  for (const a of arches) {
    blockStart.push(at);
    at += 1 + a.calls.length + 1;
  }
  const deny = at;
  const program: Insn[] = [{ code: BPF_LD_W_ABS, k: ARCH }];
  arches.forEach((a, i) => program.push({ code: BPF_JMP_JEQ_K, k: a.arch, jt: blockStart[i]!, jf: program.length + 1 }));
  program.push({ code: BPF_RET_K, k: SECCOMP_RET_ALLOW });
  for (const a of arches) {
    program.push({ code: BPF_LD_W_ABS, k: NR });
    for (const call of a.calls) program.push({ code: BPF_JMP_JEQ_K, k: call, jt: deny, jf: program.length + 1 });
    program.push({ code: BPF_RET_K, k: SECCOMP_RET_ALLOW });
  }
  program.push({ code: BPF_RET_K, k: SECCOMP_RET_ERRNO | ENOSYS });
  const out = Buffer.alloc(program.length * 8);
  const le = endianness() === "LE";
  program.forEach((insn, i) => {
    const offset = i * 8;
    // Jumps are relative to the next instruction, and at most 255 ahead.
    const rel = (target: number | undefined): number => (target === undefined ? 0 : target - (i + 1));
    if (le) out.writeUInt16LE(insn.code, offset);
    else out.writeUInt16BE(insn.code, offset);
    out.writeUInt8(rel(insn.jt), offset + 2);
    out.writeUInt8(rel(insn.jf), offset + 3);
    if (le) out.writeUInt32LE(insn.k >>> 0, offset + 4);
    else out.writeUInt32BE(insn.k >>> 0, offset + 4);
  });
  return out;
}

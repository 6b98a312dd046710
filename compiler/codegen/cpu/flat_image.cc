#include "compiler/codegen/cpu/flat_image.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace kiln::codegen::cpu {
namespace {

// The relocation kinds LLVM uses for position-independent code that references only its own
// sections (System V x86-64 psABI; ELF for the Arm 64-bit Architecture).
constexpr uint32_t kAarch64Prel32 = 261, kAarch64AdrPrelPgHi21 = 275, kAarch64AddAbsLo12Nc = 277,
                   kAarch64Ldst8AbsLo12Nc = 278, kAarch64Condbr19 = 280, kAarch64Jump26 = 282,
                   kAarch64Call26 = 283, kAarch64Ldst16AbsLo12Nc = 284, kAarch64Ldst32AbsLo12Nc = 285,
                   kAarch64Ldst64AbsLo12Nc = 286, kAarch64Ldst128AbsLo12Nc = 299;

Status Bad(const std::string& what) { return Internal("native code image: " + what); }

template <typename T>
bool Read(const std::vector<uint8_t>& bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

uint32_t Get32(const std::vector<uint8_t>& image, uint64_t at) {
  uint32_t v;
  std::memcpy(&v, image.data() + at, 4);
  return v;
}
void Put32(std::vector<uint8_t>& image, uint64_t at, uint32_t v) { std::memcpy(image.data() + at, &v, 4); }

}  // namespace

Result<std::vector<uint8_t>> LinkFlatImage(const std::vector<uint8_t>& object, const std::vector<std::string>& symbols,
                                           std::vector<uint32_t>* offsets) {
  Elf64_Ehdr eh;
  if (!Read(object, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_REL) {
    return Bad("not a little-endian ELF64 relocatable object");
  }
  if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) {
    return Bad("machine " + std::to_string(eh.e_machine) + " is neither x86-64 nor aarch64");
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (size_t k = 0; k < sh.size(); ++k) {
    if (!Read(object, eh.e_shoff + k * sizeof(Elf64_Shdr), &sh[k])) return Bad("section header out of the file");
  }
  if (eh.e_shstrndx >= sh.size()) return Bad("no section name table");
  auto str = [&](const Elf64_Shdr& table, uint32_t at) -> std::string_view {
    if (at >= table.sh_size || table.sh_offset + table.sh_size > object.size()) return {};
    const char* s = reinterpret_cast<const char*>(object.data() + table.sh_offset + at);
    return std::string_view(s, strnlen(s, table.sh_size - at));
  };
  auto name = [&](size_t k) { return std::string(str(sh[eh.e_shstrndx], sh[k].sh_name)); };

  // Layout: code sections, then read-only data.
  std::vector<int64_t> base(sh.size(), -1);
  std::vector<uint8_t> image;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < sh.size(); ++k) {
      const Elf64_Shdr& s = sh[k];
      if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0 || name(k) == ".eh_frame") continue;
      if (((s.sh_flags & SHF_EXECINSTR) != 0) != (pass == 0)) continue;
      const std::string n = name(k);
      if (s.sh_flags & SHF_WRITE) return Bad("writable section " + n);
      if (s.sh_type == SHT_NOBITS) return Bad("zero-filled section " + n);
      if (s.sh_type == SHT_INIT_ARRAY || s.sh_type == SHT_FINI_ARRAY || s.sh_type == SHT_PREINIT_ARRAY) {
        return Bad("initialiser section " + n);
      }
      if (s.sh_offset > object.size() || object.size() - s.sh_offset < s.sh_size) return Bad("section " + n + " out of the file");
      const uint64_t align = std::max<uint64_t>(s.sh_addralign, 1);
      image.resize((image.size() + align - 1) / align * align, 0);
      base[k] = static_cast<int64_t>(image.size());
      image.insert(image.end(), object.begin() + s.sh_offset, object.begin() + s.sh_offset + s.sh_size);
    }
  }

  // The symbol table.
  const Elf64_Shdr* symtab = nullptr;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type == SHT_SYMTAB) symtab = &s;
  }
  if (symtab == nullptr || symtab->sh_link >= sh.size()) return Bad("no symbol table");
  const size_t num_syms = symtab->sh_size / sizeof(Elf64_Sym);
  auto sym = [&](size_t k, Elf64_Sym* out) { return Read(object, symtab->sh_offset + k * sizeof(Elf64_Sym), out); };
  auto sym_name = [&](const Elf64_Sym& s) { return std::string(str(sh[symtab->sh_link], s.st_name)); };

  offsets->assign(symbols.size(), 0);
  std::vector<bool> found(symbols.size(), false);
  for (size_t k = 0; k < num_syms; ++k) {
    Elf64_Sym s;
    if (!sym(k, &s)) return Bad("symbol out of the file");
    const std::string n = sym_name(s);
    for (size_t j = 0; j < symbols.size(); ++j) {
      if (n != symbols[j]) continue;
      if (s.st_shndx >= sh.size() || base[s.st_shndx] < 0) return Bad("function " + n + " is not in a code section");
      // An empty function is one LLVM deleted as undefined behaviour: calling it would run
      // whatever follows.
      if (s.st_size == 0) return Bad("function " + n + " has no code");
      (*offsets)[j] = static_cast<uint32_t>(base[s.st_shndx] + static_cast<int64_t>(s.st_value));
      found[j] = true;
    }
  }
  for (size_t j = 0; j < symbols.size(); ++j) {
    if (!found[j]) return Bad("no function " + symbols[j]);
  }

  // Relocations of the sections in the image.
  for (size_t r = 0; r < sh.size(); ++r) {
    const Elf64_Shdr& rs = sh[r];
    if (rs.sh_type == SHT_REL) return Bad("REL relocations in " + name(r) + " (expected RELA)");
    if (rs.sh_type != SHT_RELA || rs.sh_info >= sh.size() || base[rs.sh_info] < 0) continue;
    const std::string target = name(rs.sh_info);
    for (uint64_t k = 0; k < rs.sh_size / sizeof(Elf64_Rela); ++k) {
      Elf64_Rela rel;
      if (!Read(object, rs.sh_offset + k * sizeof(Elf64_Rela), &rel)) return Bad("relocation out of the file");
      const uint32_t type = ELF64_R_TYPE(rel.r_info);
      Elf64_Sym s;
      if (!sym(ELF64_R_SYM(rel.r_info), &s)) return Bad("relocation symbol out of the table");
      if (s.st_shndx == SHN_UNDEF) {
        return Bad("the code calls or reads '" + sym_name(s) + "', outside the image (from " + target + ")");
      }
      if (s.st_shndx >= sh.size() || base[s.st_shndx] < 0) {
        return Bad("a relocation in " + target + " refers to section " + name(s.st_shndx) + ", not in the image");
      }
      const int64_t S = base[s.st_shndx] + static_cast<int64_t>(s.st_value);
      const int64_t A = rel.r_addend;
      const int64_t P = base[rs.sh_info] + static_cast<int64_t>(rel.r_offset);
      const uint64_t width = eh.e_machine == EM_X86_64 && type == R_X86_64_PC64 ? 8 : 4;
      if (rel.r_offset > sh[rs.sh_info].sh_size || sh[rs.sh_info].sh_size - rel.r_offset < width) {
        return Bad("relocation beyond section " + target);
      }
      const std::string where = "relocation type " + std::to_string(type) + " at " + target + "+" +
                                std::to_string(rel.r_offset);
      if (eh.e_machine == EM_X86_64) {
        if (type == R_X86_64_PC32 || type == R_X86_64_PLT32) {
          const int64_t v = S + A - P;
          if (v < INT32_MIN || v > INT32_MAX) return Bad(where + " out of range");
          Put32(image, P, static_cast<uint32_t>(v));
        } else if (type == R_X86_64_PC64) {
          const int64_t v = S + A - P;
          std::memcpy(image.data() + P, &v, 8);
        } else {
          return Bad(where + ": not a PC-relative kind");
        }
        continue;
      }
      const uint32_t insn = Get32(image, P);
      const int64_t value = S + A;
      auto set_imm12 = [&](int shift) {
        Put32(image, P, (insn & ~(0xfffu << 10)) | ((static_cast<uint32_t>((value & 0xfff) >> shift) & 0xfffu) << 10));
      };
      switch (type) {
        case kAarch64AdrPrelPgHi21: {
          const int64_t pages = ((value & ~int64_t{0xfff}) - (P & ~int64_t{0xfff})) >> 12;
          if (pages < -(int64_t{1} << 20) || pages >= (int64_t{1} << 20)) return Bad(where + " out of range");
          const uint32_t imm = static_cast<uint32_t>(pages) & 0x1fffffu;
          Put32(image, P, (insn & ~((3u << 29) | (0x7ffffu << 5))) | ((imm & 3u) << 29) | ((imm >> 2) << 5));
          break;
        }
        case kAarch64AddAbsLo12Nc: case kAarch64Ldst8AbsLo12Nc: set_imm12(0); break;
        case kAarch64Ldst16AbsLo12Nc: set_imm12(1); break;
        case kAarch64Ldst32AbsLo12Nc: set_imm12(2); break;
        case kAarch64Ldst64AbsLo12Nc: set_imm12(3); break;
        case kAarch64Ldst128AbsLo12Nc: set_imm12(4); break;
        case kAarch64Call26: case kAarch64Jump26: {
          const int64_t d = (value - P) >> 2;
          if (d < -(int64_t{1} << 25) || d >= (int64_t{1} << 25)) return Bad(where + " out of range");
          Put32(image, P, (insn & ~0x3ffffffu) | (static_cast<uint32_t>(d) & 0x3ffffffu));
          break;
        }
        case kAarch64Condbr19: {
          const int64_t d = (value - P) >> 2;
          if (d < -(int64_t{1} << 18) || d >= (int64_t{1} << 18)) return Bad(where + " out of range");
          Put32(image, P, (insn & ~(0x7ffffu << 5)) | ((static_cast<uint32_t>(d) & 0x7ffffu) << 5));
          break;
        }
        case kAarch64Prel32: {
          const int64_t v = value - P;
          if (v < INT32_MIN || v > INT32_MAX) return Bad(where + " out of range");
          Put32(image, P, static_cast<uint32_t>(v));
          break;
        }
        default:
          return Bad(where + ": not a kind the image resolves");
      }
    }
  }
  if (image.empty()) return Bad("no code");
  return image;
}

}  // namespace kiln::codegen::cpu

#include "services/node/cli/completion.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "services/node/cli/cli_args.h"
#include "services/node/cli/command_table.h"

namespace berth::cli {
namespace {

// The command groups: their first word and the nested commands' second.
const std::vector<std::string>& Groups() {
  static const auto* const kGroups =
      new std::vector<std::string>{"image", "node"};
  return *kGroups;
}

// Every name a command is typed as: its name and its aliases.
std::vector<std::string> TypedNames(const CommandInfo& command) {
  std::vector<std::string> names = {command.name};
  names.insert(names.end(), command.aliases.begin(), command.aliases.end());
  return names;
}

// The words `berth` takes first (the groups' once), in the table's order.
std::vector<std::string> TopWords() {
  std::vector<std::string> words;
  std::set<std::string> seen;
  for (const CommandInfo& command : Commands()) {
    for (const std::string& name : TypedNames(command)) {
      std::string first(name.substr(0, name.find(' ')));
      if (seen.insert(first).second) words.push_back(first);
    }
  }
  words.push_back("help");
  return words;
}

// The second words of `group`'s commands.
std::vector<std::string> GroupWords(absl::string_view group) {
  std::vector<std::string> words;
  const std::string prefix = absl::StrCat(group, " ");
  for (const CommandInfo& command : Commands()) {
    for (const std::string& name : TypedNames(command)) {
      if (absl::StartsWith(name, prefix)) {
        words.push_back(name.substr(prefix.size()));
      }
    }
  }
  return words;
}

// One line about a command: its line in `berth --help` (or its group's
// help), else its description's first line.
std::string Summary(const CommandInfo& command) {
  std::vector<std::string> usages = {TopUsage()};
  for (const std::string& group : Groups()) {
    if (absl::StartsWith(command.name, group + " ") && IsCommandGroup(group)) {
      usages.push_back(GroupUsage(group));
    }
  }
  for (const std::string& usage : usages) {
    for (absl::string_view line : absl::StrSplit(usage, '\n')) {
      for (absl::string_view name : {absl::string_view(command.name),
                                     absl::string_view(command.name)
                                         .substr(command.name.find(' ') + 1)}) {
        absl::string_view rest = line;
        if (absl::ConsumePrefix(&rest, "  ") &&
            absl::ConsumePrefix(&rest, name) && absl::StartsWith(rest, " ")) {
          absl::string_view summary = absl::StripAsciiWhitespace(rest);
          if (!summary.empty()) return std::string(summary);
        }
      }
    }
  }
  return std::string(absl::StripAsciiWhitespace(
      command.description.substr(0, command.description.find('\n'))));
}

// A value that is a file of this host (--env-file FILE, --socket PATH).
bool TakesFile(const FlagSpec& flag) {
  return absl::StrContains(flag.value_name, "FILE") ||
         absl::StrContains(flag.value_name, "PATH");
}

// ' quoted for a shell.
std::string Quote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

std::string KindName(ArgKind kind) {
  switch (kind) {
    case ArgKind::kTask:
      return "task";
    case ArgKind::kImage:
      return "image";
    case ArgKind::kFile:
      return "file";
    case ArgKind::kWord:
      return "word";
    case ArgKind::kNone:
      break;
  }
  return "none";
}

// --- bash

constexpr char kBashHead[] =
    R"sh(# bash completion for berth: commands, flags, task and image names.
# Made by `berth completion bash` from berth's command table.
# Install: berth completion bash > /etc/bash_completion.d/berth
#     (or: source <(berth completion bash) in ~/.bashrc)

# berth itself, with the line's --socket, quietly, for at most 5 seconds:
# nothing when the node is down.
_berth_node() {
  local berth=${COMP_WORDS[0]:-berth}
  if command -v timeout >/dev/null 2>&1; then
    timeout 5 "$berth" "${_berth_socket[@]}" "$@" 2>/dev/null
  else
    "$berth" "${_berth_socket[@]}" "$@" 2>/dev/null
  fi
}

# COMPREPLY: the words of $1 (one a line) that start with the word being
# completed, less what bash keeps before a ':' or '='.
_berth_reply() {
  local IFS=$'\n' word
  COMPREPLY=()
  for word in $1; do
    [[ $word == "$_berth_cur"* ]] && COMPREPLY+=("${word#"$_berth_prefix"}")
  done
  if (( ${#COMPREPLY[@]} == 1 )) && [[ ${COMPREPLY[0]} == *= ]]; then
    compopt -o nospace 2>/dev/null
  fi
  return 0
}

# COMPREPLY: files and directories (after the prefix $1 of the word).
_berth_files() {
  local IFS=$'\n' file
  COMPREPLY=()
  for file in $(compgen -f -- "${_berth_cur#"$1"}"); do
    COMPREPLY+=("${1#"$_berth_prefix"}$file")
  done
  compopt -o filenames 2>/dev/null
  return 0
}

# The values of the flag $1 (its long name) in the word, after $2.
_berth_value() {
  local flag=$1 prefix=$2 values='' value
  case $flag in
@VALUE_CASES@
  esac
  local list=''
  for value in $values; do list+="$prefix$value"$'\n'; done
  _berth_reply "$list"
}

_berth() {
  # The words as typed: bash splits "busybox:latest" and "K=V" at ':' and
  # '=' (COMP_WORDBREAKS); glued again where no space was between them.
  local -a words=()
  local cword=0 k pos=0 token rest trimmed line=${COMP_LINE-}
  for ((k = 0; k < ${#COMP_WORDS[@]}; k++)); do
    token=${COMP_WORDS[k]}
    if [[ -n $line ]]; then
      rest=${line:pos}
      trimmed=${rest#"${rest%%[![:space:]]*}"}
      pos=$((pos + ${#rest} - ${#trimmed} + ${#token}))
      if ((k > 0 && ${#rest} == ${#trimmed})); then
        words[-1]+=$token
        ((k == COMP_CWORD)) && cword=$((${#words[@]} - 1))
        continue
      fi
    fi
    words+=("$token")
    ((k == COMP_CWORD)) && cword=$((${#words[@]} - 1))
  done
  local _berth_cur=${words[cword]}
  local raw=${COMP_WORDS[COMP_CWORD]}
  local _berth_prefix=''
  if [[ $raw == [:=] ]]; then
    _berth_prefix=$_berth_cur
  elif [[ $_berth_cur == *"$raw" ]]; then
    _berth_prefix=${_berth_cur%"$raw"}
  fi
  local cur=$_berth_cur
  COMPREPLY=()

  # Global flags, then the command.
  local -a _berth_socket=()
  local i=1 word
  while ((i < cword)); do
    word=${words[i]}
    case $word in
      --socket) _berth_socket=(--socket "${words[i + 1]}"); ((i += 2)); continue ;;
      --socket=*) _berth_socket=("$word"); ((i++)); continue ;;
      -*) ((i++)); continue ;;
    esac
    break
  done
  if ((i >= cword)); then
    if [[ ${words[cword - 1]} == --socket ]] && ((cword > 1)); then
      _berth_files ''
    elif [[ $cur == --socket=* ]]; then
      _berth_files --socket=
    elif [[ $cur == -* ]]; then
      _berth_reply $'--socket\n--help\n--version'
    else
      _berth_reply @TOP_WORDS@
    fi
    return 0
  fi
  local cmd=${words[i]}
  ((i++))
  case $cmd in
@GROUP_CASES@
    help)
      if ((i == cword)); then
        _berth_reply @TOP_WORDS@
      elif ((i + 1 == cword)); then
        case ${words[i]} in
@HELP_GROUP_CASES@
        esac
      fi
      return 0
      ;;
  esac

  local key=''
  case $cmd in
@KEY_CASES@
    *) return 0 ;;
  esac

  # The command's flags (form -> b: boolean, v: value, f: file value, then
  # the long name), the flags offered, its positional arguments.
  local -A opts=()
  local offer='' kinds='' repeat=0 stopfirst=0 dashcmd=0 argwords=''
  case $key in
@COMMAND_CASES@
  esac

  local npos=0 flags_done=0 dash_first=0 pending='' kind='' n
  while ((i < cword)); do
    word=${words[i]}
    ((i++))
    if [[ -n $pending ]]; then
      pending=''
      continue
    fi
    if ((!flags_done)); then
      if [[ $word == -- ]]; then
        flags_done=1
        ((npos == 0)) && dash_first=1
        continue
      fi
      if [[ $word == --*=* ]]; then
        continue
      fi
      if [[ $word == --* ]]; then
        [[ ${opts[$word]-} == [vf]:* ]] && pending=${opts[$word]}
        continue
      fi
      if [[ $word == -?* ]]; then
        for ((n = 1; n < ${#word}; n++)); do
          kind=${opts[-${word:n:1}]-}
          if [[ $kind == [vf]:* ]]; then
            ((n == ${#word} - 1)) && pending=$kind
            break
          fi
        done
        continue
      fi
    fi
    ((npos++))
    ((stopfirst)) && flags_done=1
  done

  # A flag's value.
  if [[ -n $pending ]]; then
    if [[ $pending == f:* ]]; then
      _berth_files ''
    else
      _berth_value "${pending#?:}" ''
    fi
    return 0
  fi
  if ((!flags_done)) && [[ $cur == -* ]]; then
    if [[ $cur == --*=* ]]; then
      kind=${opts[${cur%%=*}]-}
      if [[ $kind == f:* ]]; then
        _berth_files "${cur%%=*}="
      elif [[ $kind == v:* ]]; then
        _berth_value "${kind#?:}" "${cur%%=*}="
      fi
      return 0
    fi
    _berth_reply "$offer"
    return 0
  fi

  # A positional argument.
  local -a kindlist=($kinds)
  if ((dash_first && dashcmd)); then
    kind=file
  elif ((npos < ${#kindlist[@]})); then
    kind=${kindlist[npos]}
  elif ((repeat && ${#kindlist[@]} > 0)); then
    kind=${kindlist[-1]}
  else
    kind=none
  fi
  case $kind in
    task) _berth_reply "$(_berth_node ps -a --format '{{.Names}}')" ;;
    image) _berth_reply "$(_berth_node __complete images)" ;;
    file) _berth_files '' ;;
    word) _berth_reply "$argwords" ;;
  esac
  return 0
}

complete -F _berth berth
)sh";

// Words as one $'...' argument of newline-separated words.
std::string BashWordList(const std::vector<std::string>& words) {
  std::string list;
  for (const std::string& word : words) {
    for (char c : word) {
      if (c == '\'' || c == '\\') list += '\\';
      list += c;
    }
    list += "\\n";
  }
  return absl::StrCat("$'", list, "'");
}

std::string BashCommandCase(const CommandInfo& command) {
  std::vector<std::string> opts;
  std::vector<std::string> offer;
  for (const FlagSpec& flag : command.flags) {
    const std::string kind = flag.value_name.empty() ? "b"
                             : TakesFile(flag)       ? "f"
                                                     : "v";
    const std::string value = absl::StrCat(kind, ":", flag.name);
    std::vector<std::string> forms = {absl::StrCat("--", flag.name)};
    for (const std::string& alias : flag.aliases) {
      forms.push_back(absl::StrCat("--", alias));
    }
    if (flag.short_name != 0) {
      forms.push_back(absl::StrCat("-", std::string(1, flag.short_name)));
      offer.push_back(forms.back());
    }
    offer.push_back(forms[0]);
    for (const std::string& form : forms) {
      opts.push_back(absl::StrCat("[", Quote(form), "]=", Quote(value)));
    }
  }
  const Positionals positionals = PositionalsOf(command);
  std::vector<std::string> kinds;
  for (ArgKind kind : positionals.kinds) kinds.push_back(KindName(kind));
  return absl::StrCat(
      "    ", Quote(command.name), ")\n", "      opts=(",
      absl::StrJoin(opts, " "), ")\n", "      offer=", BashWordList(offer),
      "\n", "      kinds=", Quote(absl::StrJoin(kinds, " ")),
      " repeat=", positionals.last_repeats ? 1 : 0,
      " stopfirst=", command.mode == PositionalMode::kStopAtFirst ? 1 : 0,
      " dashcmd=", positionals.dash_dash_command ? 1 : 0, "\n",
      "      argwords=", BashWordList(positionals.words), "\n", "      ;;\n");
}

std::string BashScript() {
  // Flags with values to offer, by long name (each flag name once).
  std::string value_cases;
  std::set<std::string> seen;
  for (const CommandInfo& command : Commands()) {
    for (const FlagSpec& flag : command.flags) {
      const std::vector<std::string> words = FlagValueWords(flag.name);
      if (words.empty() || !seen.insert(flag.name).second) continue;
      absl::StrAppend(&value_cases, "    ", Quote(flag.name),
                      ") values=", Quote(absl::StrJoin(words, " ")), " ;;\n");
    }
  }
  std::string group_cases;
  std::string help_group_cases;
  for (const std::string& group : Groups()) {
    const std::string words = BashWordList(GroupWords(group));
    absl::StrAppend(&group_cases, "    ", group, ")\n",
                    "      if ((i == cword)); then\n", "        _berth_reply ",
                    words, "\n", "        return 0\n", "      fi\n",
                    "      cmd=\"", group, " ${words[i]}\"\n",
                    "      ((i++))\n", "      ;;\n");
    absl::StrAppend(&help_group_cases, "          ", group, ") _berth_reply ",
                    words, " ;;\n");
  }
  std::string key_cases;
  std::string command_cases;
  for (const CommandInfo& command : Commands()) {
    std::vector<std::string> names;
    for (const std::string& name : TypedNames(command)) {
      names.push_back(Quote(name));
    }
    absl::StrAppend(&key_cases, "    ", absl::StrJoin(names, "|"),
                    ") key=", Quote(command.name), " ;;\n");
    absl::StrAppend(&command_cases, BashCommandCase(command));
  }
  absl::StripTrailingAsciiWhitespace(&value_cases);
  absl::StripTrailingAsciiWhitespace(&group_cases);
  absl::StripTrailingAsciiWhitespace(&help_group_cases);
  absl::StripTrailingAsciiWhitespace(&key_cases);
  absl::StripTrailingAsciiWhitespace(&command_cases);
  return absl::StrReplaceAll(kBashHead,
                             {{"@VALUE_CASES@", value_cases},
                              {"@TOP_WORDS@", BashWordList(TopWords())},
                              {"@GROUP_CASES@", group_cases},
                              {"@HELP_GROUP_CASES@", help_group_cases},
                              {"@KEY_CASES@", key_cases},
                              {"@COMMAND_CASES@", command_cases}});
}

// --- zsh

constexpr char kZshHead[] = R"sh(#compdef berth
# zsh completion for berth: commands, flags, task and image names.
# Made by `berth completion zsh` from berth's command table.
# Install: berth completion zsh > "${fpath[1]}/_berth" (a directory in
# $fpath; then compinit), or: source <(berth completion zsh) after compinit.

# berth itself, with the line's --socket, quietly: nothing when the node is
# down.
_berth_node() {
  if (( $+commands[timeout] )); then
    timeout 5 ${_berth_cmd:-berth} "${_berth_socket[@]}" "$@" 2>/dev/null
  else
    ${_berth_cmd:-berth} "${_berth_socket[@]}" "$@" 2>/dev/null
  fi
}

_berth_tasks() {
  local -a tasks
  tasks=(${(f)"$(_berth_node ps -a --format '{{.Names}}')"})
  _wanted tasks expl task compadd -a tasks
}

_berth_images() {
  local -a images
  images=(${(f)"$(_berth_node __complete images)"})
  _wanted images expl image compadd -a images
}

_berth_commands() {
  local -a commands
  commands=(
@COMMAND_LIST@
  )
  _describe -t commands 'berth command' commands
}

@GROUP_FUNCTIONS@

_berth_command() {
  case $1 in
@COMMAND_CASES@
  esac
}

_berth() {
  local curcontext=$curcontext state state_descr line ret=1
  local -a _berth_socket
  local _berth_cmd=${words[1]}
  typeset -A opt_args
  _arguments -C -S : \
    '--socket=[berth-node socket]:socket:_files' \
    '(- *)'{-h,--help}'[Print help]' \
    '(- *)--version[Print berth version]' \
    '1:command:->command' \
    '*::argument:->argument' && ret=0
  [[ -n ${opt_args[--socket]} ]] && _berth_socket=(--socket "${opt_args[--socket]}")
  case $state in
    (command)
      _berth_commands && ret=0
      ;;
    (argument)
      local key=${words[1]}
      case $key in
@GROUP_DISPATCH@
        (help)
          if (( CURRENT == 2 )); then
            _berth_commands && ret=0
          else
            case ${words[2]} in
@HELP_GROUP_DISPATCH@
            esac
          fi
          return ret
          ;;
      esac
      curcontext="${curcontext%:*:*}:berth-${key// /-}:"
      _berth_command "$key" && ret=0
      ;;
  esac
  return ret
}

if [[ $zsh_eval_context[-1] == loadautoload ]]; then
  _berth "$@"
else
  compdef _berth berth
fi
)sh";

// Text inside [...] of an _arguments spec, in single quotes.
std::string ZshHelp(absl::string_view text) {
  return absl::StrReplaceAll(text,
                             {{"'", "'\\''"}, {"[", "\\["}, {"]", "\\]"}});
}

// A message or an action part of a spec (':' separates them).
std::string ZshPart(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"'", "'\\''"}, {":", "\\:"}});
}

std::string ZshFlagSpec(const FlagSpec& flag) {
  std::vector<std::string> forms;
  if (flag.short_name != 0) {
    forms.push_back(absl::StrCat("-", std::string(1, flag.short_name)));
  }
  forms.push_back(absl::StrCat("--", flag.name));
  for (const std::string& alias : flag.aliases) {
    forms.push_back(absl::StrCat("--", alias));
  }
  std::vector<std::string> spelled;
  for (const std::string& form : forms) {
    if (flag.value_name.empty()) {
      spelled.push_back(form);
    } else {
      // -m VALUE or -mVALUE; --memory VALUE or --memory=VALUE.
      spelled.push_back(
          absl::StrCat(form, absl::StartsWith(form, "--") ? "=" : "+"));
    }
  }
  std::string spec;
  if (flag.repeated) {
    spec = "'*'";
  } else if (forms.size() > 1) {
    spec = absl::StrCat("'(", absl::StrJoin(forms, " "), ")'");
  }
  if (spelled.size() > 1) {
    absl::StrAppend(&spec, "{", absl::StrJoin(spelled, ","), "}");
  } else {
    absl::StrAppend(&spec, spelled[0]);
  }
  absl::StrAppend(&spec, "'[", ZshHelp(flag.help), "]");
  if (!flag.value_name.empty()) {
    std::string action = " ";
    if (TakesFile(flag)) {
      action = "_files";
    } else if (std::vector<std::string> words = FlagValueWords(flag.name);
               !words.empty()) {
      action = absl::StrCat("(", absl::StrJoin(words, " "), ")");
    }
    absl::StrAppend(&spec, ":", ZshPart(flag.value_name), ":", ZshPart(action));
  }
  return absl::StrCat(spec, "'");
}

std::string ZshPositionalSpecs(const CommandInfo& command) {
  const Positionals positionals = PositionalsOf(command);
  std::vector<std::string> specs;
  // The message and the action of a kind.
  auto spec = [&](ArgKind kind) -> std::pair<std::string, std::string> {
    switch (kind) {
      case ArgKind::kTask:
        return {"task", "_berth_tasks"};
      case ArgKind::kImage:
        return {"image", "_berth_images"};
      case ArgKind::kFile:
        return {"file", "_files"};
      case ArgKind::kWord:
        return {"word",
                absl::StrCat("(", absl::StrJoin(positionals.words, " "), ")")};
      case ArgKind::kNone:
        break;
    }
    return {"argument", " "};
  };
  for (size_t i = 0; i < positionals.kinds.size(); ++i) {
    const bool rest =
        positionals.last_repeats && i + 1 == positionals.kinds.size();
    const auto [message, action] = spec(positionals.kinds[i]);
    specs.push_back(absl::StrCat("'", rest ? "*" : absl::StrCat(i + 1), ":",
                                 ZshPart(message), ":", ZshPart(action), "'"));
  }
  return absl::StrJoin(specs, " \\\n        ");
}

std::string ZshScript() {
  std::string command_list;
  for (const CommandInfo& command : Commands()) {
    if (command.name.find(' ') == std::string::npos) {
      absl::StrAppend(&command_list, "    ",
                      Quote(absl::StrCat(command.name, ":", Summary(command))),
                      "\n");
    }
    for (const std::string& alias : command.aliases) {
      if (alias.find(' ') != std::string::npos) continue;
      absl::StrAppend(&command_list, "    ",
                      Quote(absl::StrCat(alias, ":", Summary(command),
                                         " (berth ", command.name, ")")),
                      "\n");
    }
  }
  for (const std::string& group : Groups()) {
    absl::StrAppend(&command_list, "    ",
                    Quote(absl::StrCat(
                        group, ":",
                        group == "image" ? "Manage the node's images"
                                         : "The node's services and plugins")),
                    "\n");
  }
  absl::StrAppend(&command_list, "    'help:Print the help of a command'\n");

  std::string group_functions;
  std::string group_dispatch;
  std::string help_group_dispatch;
  for (const std::string& group : Groups()) {
    std::string entries;
    const std::string prefix = absl::StrCat(group, " ");
    for (const CommandInfo& command : Commands()) {
      for (const std::string& name : TypedNames(command)) {
        if (!absl::StartsWith(name, prefix)) continue;
        absl::StrAppend(&entries, "    ",
                        Quote(absl::StrCat(name.substr(prefix.size()), ":",
                                           Summary(command))),
                        "\n");
      }
    }
    absl::StrAppend(&group_functions, "_berth_", group, "_commands() {\n",
                    "  local -a commands\n  commands=(\n", entries, "  )\n",
                    "  _describe -t commands 'berth ", group,
                    " command' commands\n}\n\n");
    absl::StrAppend(&group_dispatch, "        (", group, ")\n",
                    "          if (( CURRENT == 2 )); then\n",
                    "            _berth_", group, "_commands && ret=0\n",
                    "            return ret\n", "          fi\n",
                    "          key=\"", group, " ${words[2]}\"\n",
                    "          shift words\n", "          (( CURRENT-- ))\n",
                    "          ;;\n");
    absl::StrAppend(&help_group_dispatch, "              (", group, ") (( ",
                    "CURRENT == 3 )) && _berth_", group,
                    "_commands && ret=0 ;;\n");
  }

  std::string command_cases;
  for (const CommandInfo& command : Commands()) {
    std::vector<std::string> names;
    for (const std::string& name : TypedNames(command)) {
      names.push_back(Quote(name));
    }
    std::vector<std::string> specs;
    for (const FlagSpec& flag : command.flags) {
      specs.push_back(ZshFlagSpec(flag));
    }
    const std::string positionals = ZshPositionalSpecs(command);
    if (!positionals.empty()) specs.push_back(positionals);
    absl::StrAppend(
        &command_cases, "    (", absl::StrJoin(names, "|"), ")\n",
        "      _arguments -s -S",
        command.mode == PositionalMode::kStopAtFirst ? " -A '-*'" : "",
        " : \\\n        ", absl::StrJoin(specs, " \\\n        "), "\n",
        "      ;;\n");
  }
  absl::StripTrailingAsciiWhitespace(&command_list);
  absl::StripTrailingAsciiWhitespace(&group_functions);
  absl::StripTrailingAsciiWhitespace(&group_dispatch);
  absl::StripTrailingAsciiWhitespace(&help_group_dispatch);
  absl::StripTrailingAsciiWhitespace(&command_cases);
  return absl::StrReplaceAll(kZshHead,
                             {{"@COMMAND_LIST@", command_list},
                              {"@GROUP_FUNCTIONS@", group_functions},
                              {"@GROUP_DISPATCH@", group_dispatch},
                              {"@HELP_GROUP_DISPATCH@", help_group_dispatch},
                              {"@COMMAND_CASES@", command_cases}});
}

}  // namespace

Positionals PositionalsOf(const CommandInfo& command) {
  Positionals result;
  const absl::string_view first_line =
      absl::string_view(command.synopsis)
          .substr(0, command.synopsis.find('\n'));
  result.dash_dash_command = absl::StrContains(command.synopsis, "-- COMMAND");
  for (absl::string_view token :
       absl::StrSplit(first_line, ' ', absl::SkipWhitespace())) {
    const bool repeats = absl::StrContains(token, "...");
    std::string word(token);
    absl::StrReplaceAll({{"[", ""}, {"]", ""}, {"...", ""}}, &word);
    if (word.empty() || word == "FLAGS" || word == "--") continue;
    ArgKind kind = ArgKind::kNone;
    if (word == "TASK") {
      kind = ArgKind::kTask;
    } else if (word == "IMAGE" || word == "REFERENCE" || word == "SOURCE") {
      kind = ArgKind::kImage;
    } else if (word == "FILE|-" || word == "FILE" || word == "PATH" ||
               word == "COMMAND" || word == "ARGS") {
      kind = ArgKind::kFile;
    } else if (absl::StrContains(word, '|') &&
               absl::AsciiStrToLower(word) == word) {
      kind = ArgKind::kWord;
      result.words = absl::StrSplit(word, '|');
    }
    result.kinds.push_back(kind);
    if (repeats) {
      result.last_repeats = true;
      break;
    }
  }
  return result;
}

std::vector<std::string> FlagValueWords(absl::string_view flag) {
  if (flag == "pull") return {"missing", "always", "never"};
  if (flag == "progress") return {"auto", "tty", "plain"};
  if (flag == "restart") return {"no", "on-failure", "always"};
  if (flag == "network") return {"none", "host", "bridge", "cni:"};
  if (flag == "userns") return {"auto", "host"};
  if (flag == "health-on-failure") return {"none", "kill", "restart", "stop"};
  if (flag == "format") return {"json", "table"};
  if (flag == "filter") {
    return {"label=",
            "name=",
            "id=",
            "status=created",
            "status=pending",
            "status=starting",
            "status=running",
            "status=restarting",
            "status=exited",
            "status=failed",
            "health=starting",
            "health=healthy",
            "health=unhealthy",
            "health=none"};
  }
  return {};
}

absl::StatusOr<std::string> CompletionScript(absl::string_view shell) {
  if (shell == "bash") return BashScript();
  if (shell == "zsh") return ZshScript();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown shell \"", shell, "\": bash or zsh"));
}

}  // namespace berth::cli

# bash completion for pjrtctl: commands, their flags, and files of the
# kinds they take (.mlir and .hlo programs, .npy arrays). Installed as
# share/bash-completion/completions/pjrtctl.

_pjrtctl() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion || return
  else
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi

  local commands="info devices health stats top sessions compile run put get transfer bench token"
  local global="--address --json --timeout --token-file --tls-ca --tls-cert --tls-key --help --version"

  # The command is the first word that is not a global flag or its value.
  local command="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --address | --timeout | --token-file | --tls-ca | --tls-cert | --tls-key) ((i++)) ;;
      -*) ;;
      *) command=${words[i]}; break ;;
    esac
  done

  case $prev in
    --address | --from | --to)
      COMPREPLY=($(compgen -W "unix://" -- "$cur"))
      return ;;
    --admin-token-file | --token-file | --tls-ca | --tls-cert | --tls-key)
      COMPREPLY=($(compgen -f -- "$cur"))
      return ;;
    --input | -o | --output)
      COMPREPLY=($(compgen -f -X '!*.npy' -- "$cur") $(compgen -d -- "$cur"))
      return ;;
    --output-dir)
      COMPREPLY=($(compgen -d -- "$cur"))
      return ;;
    --timeout | --wait | --device | --replicas | --partitions | --repeat | \
      --session | --lease | --from-device | --to-device | --receive-timeout | \
      --size | --calls | --transfers | --close | --name)
      return ;;
  esac

  local flags=""
  case $command in
    "")
      COMPREPLY=($(compgen -W "$commands $global" -- "$cur"))
      return ;;
    health) flags="--wait" ;;
    top) flags="--interval --frames" ;;
    sessions) flags="--close --admin-token-file" ;;
    compile)
      flags=""
      [[ $cur != -* ]] &&
        COMPREPLY=($(compgen -f -X '!*.mlir' -- "$cur")
                   $(compgen -f -X '!*.hlo' -- "$cur") $(compgen -d -- "$cur")) ;;
    run)
      flags="--input --output-dir --device --replicas --partitions --repeat"
      [[ $cur != -* ]] &&
        COMPREPLY=($(compgen -f -X '!*.mlir' -- "$cur")
                   $(compgen -f -X '!*.hlo' -- "$cur") $(compgen -d -- "$cur")) ;;
    put)
      flags="--device --keep --session --lease"
      [[ $cur != -* ]] &&
        COMPREPLY=($(compgen -f -X '!*.npy' -- "$cur") $(compgen -d -- "$cur")) ;;
    get) flags="-o --output --session" ;;
    token)
      flags="--name"
      [[ $cur != -* && ${words[cword-1]} == token ]] &&
        COMPREPLY=($(compgen -W "new" -- "$cur")) ;;
    bench) flags="--size --calls --transfers --steps --device" ;;
    transfer)
      flags="--from --to --from-device --to-device --receive-timeout"
      [[ $cur != -* ]] &&
        COMPREPLY=($(compgen -f -X '!*.npy' -- "$cur") $(compgen -d -- "$cur")) ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags $global" -- "$cur"))
  fi
}

complete -F _pjrtctl pjrtctl

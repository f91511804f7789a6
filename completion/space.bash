# bash completion for the space-* commands.

# Sandbox ids, from space-ls (quietly: no DB, no ids).
_space_ids() {
	space-ls 2>/dev/null | sed -n -e 's/.*"id":"\([a-z2-7]\{12\}\)".*/\1/p' \
	    -e 's/.*"name":"\([a-z0-9-]\{1,63\}\)".*/\1/p'
}

# Snapshot ids of sandbox $1, from space-snap ls.
_space_snaps() {
	space-snap ls "$1" 2>/dev/null | sed -n 's/.*"snap":"\([a-z2-7]\{12\}\)".*/\1/p'
}

# Volume names, from space-volume ls.
_space_volumes() {
	space-volume ls 2>/dev/null | sed -n 's/.*"volume":"\([a-z0-9-]\{1,63\}\)".*/\1/p'
}

_space_templates() {
	space-template ls 2>/dev/null | sed -n 's/.*"template":"\([^"]*\)".*/\1/p' | sort -u
}

# Sandbox ids in one of the states given ($1 a regex alternation: running|paused).
_space_ids_in() {
	space-ls 2>/dev/null | grep -E "\"state\":\"($1)\"" |
	    sed -n 's/.*"id":"\([a-z2-7]\{12\}\)".*/\1/p'
}

# NAME@DIGEST of every template the DB knows (pull wants the digest in full).
_space_template_refs() {
	space-template ls 2>/dev/null |
	    sed -n 's/.*"template":"\([^"]*\)","digest":"\([0-9a-f]*\)".*/\1@\2/p'
}

# Node names the sandboxes' records carry.
# The nodes the DB knows (space-node ls).
_space_nodes() {
	space-node ls 2>/dev/null | sed -n 's/^{"node":"\([^"]*\)".*/\1/p'
}

_space_tenants() {
	space-key ls 2>/dev/null | sed -n 's/.*"tenant":"\([^"]*\)".*/\1/p'
}

# The tenants of the HTTP API, and their keys' ids (space-tenant).
_space_api_tenants() {
	space-tenant ls 2>/dev/null | sed -n 's/^{"tenant":"\([^"]*\)".*/\1/p'
}

_space_api_keys() {
	space-tenant key ls 2>/dev/null | sed -n 's/^{"key":"\([^"]*\)".*/\1/p'
}

# Credential names and the scopes that hold some, from space-cred ls.
_space_cred_names() {
	space-cred ls 2>/dev/null | sed -n 's/.*"name":"\([^"]*\)".*/\1/p' | sort -u
}

_space_cred_scopes() {
	space-cred ls 2>/dev/null | sed -n 's/.*"scope":"\([^"]*\)".*/\1/p' | sort -u
}

# A key reference: file:PATH or cmd:PROGRAM.  Bash splits words at ':' when
# COMP_WORDBREAKS holds it (the default), so "file:/x" may arrive as
# "file" ":" "/x"; either way only the part after the colon is completed.
_space_keyref() {
	local cur=$1 prev=$2 prev2=$3 kind= rest
	if [ "$cur" = : ]; then
		kind=$prev rest=
	elif [ "$prev" = : ]; then
		kind=$prev2 rest=$cur
	elif [[ $cur == file:* || $cur == cmd:* ]]; then
		kind=${cur%%:*} rest=${cur#*:}
	fi
	case $kind in
	file)
		if [[ $COMP_WORDBREAKS == *:* && $cur != file:* ]]; then
			COMPREPLY=($(compgen -f -- "$rest"))
		else
			COMPREPLY=($(compgen -f -- "$rest" | sed 's/^/file:/'))
		fi ;;
	cmd)
		if [[ $COMP_WORDBREAKS == *:* && $cur != cmd:* ]]; then
			COMPREPLY=($(compgen -c -- "$rest" | sort -u))
		else
			COMPREPLY=($(compgen -c -- "$rest" | sort -u | sed 's/^/cmd:/'))
		fi ;;
	*)
		COMPREPLY=($(compgen -W "file: cmd:" -- "$cur"))
		compopt -o nospace 2>/dev/null ;;
	esac
}

_space() {
	local cur prev cmd
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=${COMP_WORDS[0]##*/}
	case $cmd in
	space-init)
		COMPREPLY=($(compgen -W "--loop-size" -- "$cur")) ;;
	space-template)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "import add warm ls rm push pull" -- "$cur"))
			return
		fi
		case ${COMP_WORDS[1]}:$prev in
		import:--kernel|import:--initrd|import:--daemon|add:--kernel|add:--initrd) COMPREPLY=($(compgen -f -- "$cur")) ;;
		import:--format) COMPREPLY=($(compgen -W "auto rootfs oci docker" -- "$cur")) ;;
		import:--tag) ;;
		add:*)
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--name --kernel --initrd" -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi ;;
		import:*)
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--name --format --tag --kernel --initrd --daemon --disk-extra" -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi ;;
		rm:*) COMPREPLY=($(compgen -W "--force $(_space_templates)" -- "$cur")) ;;
		warm:--memory|warm:--vcpus|warm:--start|warm:--ready|warm:--ready-timeout) ;;
		warm:*) COMPREPLY=($(compgen -W "--memory --vcpus --start --start-image --ready --ready-timeout $(_space_templates)" -- "$cur")) ;;
		push:*) COMPREPLY=($(compgen -W "$(_space_templates)" -- "$cur")) ;;
		pull:*) COMPREPLY=($(compgen -W "$(_space_template_refs)" -- "$cur")) ;;
		esac ;;
	space-create)
		case $prev in
		--template) COMPREPLY=($(compgen -W "$(_space_templates)" -- "$cur")) ;;
		--memory|--vcpus|--disk-gb|--cpu-quota|--label|--env|-n|--timeout|--wait|--ttl|--idle|--name|--request-id) ;;
		--on-expiry) COMPREPLY=($(compgen -W "kill pause suspend" -- "$cur")) ;;
		--volume) COMPREPLY=($(compgen -W "$(_space_volumes | sed 's/$/:\//')" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--template --name --request-id --memory --vcpus --disk-gb --cpu-quota --ttl --on-expiry --idle --label --env --volume -n --timeout --no-pool --cold --anywhere --wait --" -- "$cur")) ;;
		esac ;;
	space-exec)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
		elif [[ $prev == -[ewu] || $prev == --timeout ]]; then
			:
		else
			COMPREPLY=($(compgen -W "-t -d -e -w -u --timeout --" -- "$cur"))
		fi ;;
	space-ps)
		COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur")) ;;
	space-logs|space-kill)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
		elif [ "$prev" = -s ]; then
			COMPREPLY=($(compgen -W "KILL TERM INT HUP QUIT USR1 USR2 STOP CONT" -- "$cur"))
		elif [ "$cmd" = space-logs ]; then
			COMPREPLY=($(compgen -W "-f" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "-s" -- "$cur"))
		fi ;;
	space-fs)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
		elif [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "ls stat cat write mkdir rm mv" -- "$cur"))
		else
			case ${COMP_WORDS[2]} in
			write) COMPREPLY=($(compgen -W "-a -m" -- "$cur")) ;;
			mkdir) COMPREPLY=($(compgen -W "-p -m" -- "$cur")) ;;
			rm) COMPREPLY=($(compgen -W "-r" -- "$cur")) ;;
			esac
		fi ;;
	space-cp)
		if [[ $cur == *:* ]]; then
			:
		else
			COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "- $(_space_ids | sed 's/$/:/')" -- "$cur"))
		fi ;;
	space-ls)
		case $prev in
		--idle-over) ;;
		--idle-due) COMPREPLY=($(compgen -W "pause suspend rm" -- "$cur")) ;;
		--node) COMPREPLY=($(compgen -W "$(_space_nodes)" -- "$cur")) ;;
		--state) COMPREPLY=($(compgen -W "creating running paused stopped suspending suspended restoring failed recovering destroyed lost" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--state --idle-over --idle-due --pods --node --here $(_space_ids)" -- "$cur")) ;;
		esac ;;
	space-rm|space-pause|space-resume)
		case $prev in
		--wait) ;;
		*) COMPREPLY=($(compgen -W "--wait $(_space_ids)" -- "$cur")) ;;
		esac ;;
	space-trim)
		COMPREPLY=($(compgen -W "--once $(_space_ids)" -- "$cur")) ;;
	space-pool)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "set fill ls" -- "$cur"))
		elif [ "$prev" = --template ]; then
			COMPREPLY=($(compgen -W "$(_space_templates)" -- "$cur"))
		elif [ "${COMP_WORDS[1]}" = set ]; then
			COMPREPLY=($(compgen -W "--template --size --memory --vcpus" -- "$cur"))
		fi ;;
	space-node)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "ls drain ready forget beat" -- "$cur"))
		elif [ "$COMP_CWORD" -eq 2 ] && [ "${COMP_WORDS[1]}" != beat ]; then
			COMPREPLY=($(compgen -W "$(_space_nodes)" -- "$cur"))
		fi ;;
	space-reconcile)
		COMPREPLY=($(compgen -W "--once --interval --listen" -- "$cur")) ;;
	space-schedule)
		case $prev in
		--limit|--vcpu-ratio|--memory-ratio|--lost-after) ;;
		*) COMPREPLY=($(compgen -W "--limit --vcpu-ratio --memory-ratio --lost-after --no-recover" -- "$cur")) ;;
		esac ;;
	space-stop|space-start)
		case $prev in
		--timeout|--wait) ;;
		*) COMPREPLY=($(compgen -W "--timeout --wait $(_space_ids)" -- "$cur")) ;;
		esac ;;
	space-snap)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "ls rm --full --crash-consistent --tag $(_space_ids)" -- "$cur"))
			return
		fi
		case ${COMP_WORDS[1]} in
		ls) COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur")) ;;
		rm)
			if [ "$COMP_CWORD" -eq 2 ]; then
				COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
			else
				COMPREPLY=($(compgen -W "$(_space_snaps "${COMP_WORDS[2]}")" -- "$cur"))
			fi ;;
		*)
			case $prev in
			--tag) ;;
			*) COMPREPLY=($(compgen -W "--full --crash-consistent --tag $(_space_ids)" -- "$cur")) ;;
			esac ;;
		esac ;;
	space-rollback)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
		elif [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "$(_space_snaps "${COMP_WORDS[1]}")" -- "$cur"))
		fi ;;
	space-fork)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur"))
		elif [ "$prev" = -n ]; then
			:
		elif [ "$COMP_CWORD" -eq 2 ]; then
			COMPREPLY=($(compgen -W "-n $(_space_snaps "${COMP_WORDS[1]}")" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "-n" -- "$cur"))
		fi ;;
	space-gc)
		COMPREPLY=($(compgen -W "--dry-run" -- "$cur")) ;;
	space-gatewayd)
		[ "$prev" = --scan-ms ] || COMPREPLY=($(compgen -W "--scan-ms" -- "$cur")) ;;
	space-noded)
		case $prev in
		--socket) COMPREPLY=($(compgen -f -- "$cur")) ;;
		--group) COMPREPLY=($(compgen -g -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--socket --group" -- "$cur")) ;;
		esac ;;
	space-backup)
		COMPREPLY=($(compgen -W "$(_space_ids_in 'running|paused')" -- "$cur")) ;;
	space-apid)
		case $prev in
		--listen|--advertise|--max-conns|--idle-timeout|--body-max) ;;
		--audit) COMPREPLY=($(compgen -f -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--listen --advertise --tls --max-conns --idle-timeout --body-max --audit --routes" -- "$cur")) ;;
		esac ;;
	space-tenant)
		local quotas="--max-running --max-vcpus --max-memory --max-disk --templates"
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "add set ls rm key" -- "$cur"))
		elif [ "${COMP_WORDS[1]}" = key ]; then
			if [ "$COMP_CWORD" -eq 2 ]; then
				COMPREPLY=($(compgen -W "add ls rm" -- "$cur"))
			else
				case ${COMP_WORDS[2]} in
				add) [ "$prev" = --rate ] ||
					COMPREPLY=($(compgen -W "--admin --rate $(_space_api_tenants)" -- "$cur")) ;;
				ls) COMPREPLY=($(compgen -W "$(_space_api_tenants)" -- "$cur")) ;;
				rm) COMPREPLY=($(compgen -W "$(_space_api_keys)" -- "$cur")) ;;
				esac
			fi
		else
			case ${COMP_WORDS[1]} in
			set|rm) [[ $prev == --max-* ]] ||
				COMPREPLY=($(compgen -W "$([ "${COMP_WORDS[1]}" = set ] && echo "$quotas") $(_space_api_tenants)" -- "$cur")) ;;
			add) [[ $prev == --max-* ]] || COMPREPLY=($(compgen -W "$quotas" -- "$cur")) ;;
			esac
		fi ;;
	space-ttl)
		case $prev in
		--on-expiry) COMPREPLY=($(compgen -W "kill pause suspend" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--on-expiry none +30m +1h 1h 1d $(_space_ids)" -- "$cur")) ;;
		esac ;;
	space-volume)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "create ls rm snap attach detach" -- "$cur"))
		else
			case ${COMP_WORDS[1]}:$prev in
			*:--size) COMPREPLY=($(compgen -W "1G 10G 100G" -- "$cur")) ;;
			*:--tenant) COMPREPLY=($(compgen -W "$(_space_api_tenants)" -- "$cur")) ;;
			create:--from) COMPREPLY=($(compgen -W "$(_space_volumes)" -- "$cur")) ;;
			create:*) COMPREPLY=($(compgen -W "--size --from --tenant" -- "$cur")) ;;
			ls:*|rm:*|snap:*) COMPREPLY=($(compgen -W "--tenant $(_space_volumes)" -- "$cur")) ;;
			attach:*|detach:*)
				case $COMP_CWORD in
				2) COMPREPLY=($(compgen -W "$(_space_ids_in 'running|paused|stopped|suspended')" -- "$cur")) ;;
				3) COMPREPLY=($(compgen -W "$(_space_volumes)" -- "$cur")) ;;
				*) [ "${COMP_WORDS[1]}" = attach ] && COMPREPLY=($(compgen -W "--ro" -- "$cur")) ;;
				esac ;;
			esac
		fi ;;
	space-port)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "ls rm $(_space_ids_in 'running|paused')" -- "$cur"))
		else
			case ${COMP_WORDS[1]}:$prev in
			*:--listen) COMPREPLY=($(compgen -W "127.0.0.1:" -- "$cur")) ;;
			ls:*|rm:rm) COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur")) ;;
			rm:*) ;;
			*) COMPREPLY=($(compgen -W "--listen" -- "$cur")) ;;
			esac
		fi ;;
	space-metrics)
		case $prev in
		--prom) COMPREPLY=($(compgen -f -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "--prom --storage $(_space_ids)" -- "$cur")) ;;
		esac ;;
	space-events)
		case $prev in
		--since) COMPREPLY=($(compgen -W "10m 1h 1d 7d" -- "$cur")) ;;
		--id) COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur")) ;;
		--after) ;;
		*) COMPREPLY=($(compgen -W "--since --id --after -f --follow" -- "$cur")) ;;
		esac ;;
	space-suspend)
		case $prev in
		--wait) ;;
		*) COMPREPLY=($(compgen -W "--keep-local --wait $(_space_ids_in 'running|paused')" -- "$cur")) ;;
		esac ;;
	space-restore)
		case $prev in
		--node) COMPREPLY=($(compgen -W "$(_space_nodes)" -- "$cur")) ;;
		--wait) ;;
		*) COMPREPLY=($(compgen -W "--node --anywhere --wait $(_space_ids_in 'suspended|restoring')" -- "$cur")) ;;
		esac ;;
	space-egress)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "set show clear check" -- "$cur"))
			return
		fi
		case $prev in
		--tenant) COMPREPLY=($(compgen -W "default $(_space_tenants)" -- "$cur")) ;;
		--template) COMPREPLY=($(compgen -W "$(_space_templates)" -- "$cur")) ;;
		--allow|--deny|--addr) ;;
		*)
			case ${COMP_WORDS[1]} in
			set) COMPREPLY=($(compgen -W "--allow --deny --tenant --template $(_space_ids)" -- "$cur")) ;;
			show|clear) COMPREPLY=($(compgen -W "--tenant --template $(_space_ids)" -- "$cur")) ;;
			check) COMPREPLY=($(compgen -W "--tenant --template --addr --dns $(_space_ids)" -- "$cur")) ;;
			esac ;;
		esac ;;
	space-key)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "set ls rotate" -- "$cur"))
		elif [ "${COMP_WORDS[1]}" = set ] || [ "${COMP_WORDS[1]}" = rotate ]; then
			if [ "$COMP_CWORD" -eq 2 ]; then
				COMPREPLY=($(compgen -W "$(_space_tenants)" -- "$cur"))
			else
				_space_keyref "$cur" "$prev" "${COMP_WORDS[COMP_CWORD-2]}"
			fi
		fi ;;
	space-cred)
		if [ "$COMP_CWORD" -eq 1 ]; then
			COMPREPLY=($(compgen -W "add ls rm rotate audit resolve" -- "$cur"))
			return
		fi
		case $prev in
		--scope)
			COMPREPLY=($(compgen -W "global tenant/ project/ sandbox/ $(_space_cred_scopes)" -- "$cur"))
			compopt -o nospace 2>/dev/null ;;
		--inject)
			COMPREPLY=($(compgen -W "basic header: query:" -- "$cur"))
			compopt -o nospace 2>/dev/null ;;
		--sandbox) COMPREPLY=($(compgen -W "$(_space_ids)" -- "$cur")) ;;
		--tenant) COMPREPLY=($(compgen -W "$(_space_tenants)" -- "$cur")) ;;
		--name|--host|--expires|--rate|--since|--project) ;;
		*)
			case ${COMP_WORDS[1]} in
			add) COMPREPLY=($(compgen -W "--name --scope --host --inject --expires --rate" -- "$cur")) ;;
			rm) COMPREPLY=($(compgen -W "--scope $(_space_cred_names)" -- "$cur")) ;;
			rotate) COMPREPLY=($(compgen -W "--scope --expires $(_space_cred_names)" -- "$cur")) ;;
			audit) COMPREPLY=($(compgen -W "--since" -- "$cur")) ;;
			resolve) COMPREPLY=($(compgen -W "--sandbox --tenant --project" -- "$cur")) ;;
			esac ;;
		esac ;;
	esac
	# Every command takes --help and --version, before or after its operands.
	[[ $cur == --* ]] && COMPREPLY+=($(compgen -W "--help --version" -- "$cur"))
}
complete -F _space space-init space-template space-create space-exec space-ls space-rm \
	space-pause space-resume space-stop space-start space-reconcile \
	space-ps space-logs space-kill space-fs space-cp space-pool \
	space-snap space-rollback space-fork space-gc \
	space-suspend space-restore space-key space-egress space-cred space-gatewayd \
	space-node space-schedule space-backup space-apid space-tenant space-noded space-ttl space-events space-metrics space-port space-volume space-trim

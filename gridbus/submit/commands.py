"""Which submit commands gridbus knows: the ones it acts on, and HTCondor's that it only records.

An unknown command is an error (with its line), unless it is a macro that some value refers to
(`data = /scratch` ... `$(data)`), which is how submit files name their own values. A command that
HTCondor knows but gridbus does not act on is accepted with a warning; where HTCondor records it in
the job ad, gridbus records it the same way.
"""

from __future__ import annotations

import re

# Acted on: they shape the job ad the schedd, negotiator and startd use.
USED: frozenset[str] = frozenset(
    """
    executable arguments environment env getenv input output error log initialdir initial_dir iwd
    universe requirements rank request_cpus request_memory request_disk hold priority prio
    periodic_hold periodic_hold_reason periodic_hold_subcode periodic_release periodic_remove
    on_exit_hold on_exit_hold_reason on_exit_hold_subcode on_exit_remove max_retries
    success_exit_code concurrency_limits batch_name max_idle materialize_max_idle max_materialize
    job_max_vacate_time max_job_retirement_time kill_sig should_transfer_files when_to_transfer_output
    transfer_input_files transfer_output_files transfer_executable transfer_output_remaps request_gpus
    require_gpus gpus_minimum_capability gpus_maximum_capability gpus_minimum_memory gpus_minimum_runtime
    docker_image container_image checkpoint_exit_code transfer_checkpoint_files
    erase_output_and_error_on_restart
    """.split()
)

# HTCondor commands gridbus accepts but does not act on (a warning says so).
KNOWN_UNUSED: frozenset[str] = frozenset(
    """
    transfer_input transfer_output notification
    notify_user stream_output stream_error stream_input nice_user image_size
    job_lease_duration leave_in_queue
    next_job_start_delay coresize buffer_size buffer_block_size accounting_group
    accounting_group_user want_graceful_removal encrypt_execute_directory copy_to_spool
    output_destination max_transfer_input_mb max_transfer_output_mb allowed_execute_duration
    allowed_job_duration job_machine_attrs job_machine_attrs_history_length submit_event_notes
    deferral_time deferral_window deferral_prep_time cron_minute cron_hour cron_day_of_month
    cron_month cron_day_of_week email_attributes hold_kill_sig remove_kill_sig rank_factor
    description job_ad_information_attrs dont_encrypt_input_files dont_encrypt_output_files
    encrypt_input_files encrypt_output_files load_profile run_as_owner want_remote_io
    periodic_vacate request_swap request_virtualmemory retry_until
    preserve_relative_paths
    want_checkpoint_signal checkpoint_destination job_ad_file
    """.split()
)

KNOWN: frozenset[str] = USED | KNOWN_UNUSED

# Macros condor_submit defines itself; a description may refer to them without defining them.
BUILTIN_MACROS: frozenset[str] = frozenset(
    "cluster clusterid process procid node step row itemindex item dollar".split()
)

_REF = re.compile(r"\$(?:[A-Za-z_]*)\(\s*([A-Za-z_][A-Za-z0-9_.]*)")
# $CHOICE(index, listname) and $SUBSTR(name, start, length) take macro names after the first too.
_REF_ARGS = re.compile(r"\$(?:CHOICE|SUBSTR)\(([^()]*)\)", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def referenced_macros(texts: list[str]) -> set[str]:
    """Lower-cased names that `$(name)`, `$(name:default)`, `$Fn(name)` or the arguments of
    `$CHOICE()`/`$SUBSTR()` refer to in any text."""
    found: set[str] = set()
    for text in texts:
        for m in _REF.finditer(text):
            found.add(m.group(1).lower())
        for m in _REF_ARGS.finditer(text):
            found.update(arg.strip().lower() for arg in m.group(1).split(",") if _NAME.fullmatch(arg.strip()))
    return found

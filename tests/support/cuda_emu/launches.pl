#!/usr/bin/perl
# launches.pl IN.cu OUT.cc - kernels/*.cu for a host C++ compiler: each
# launch kernel<<<grid, block[, smem[, stream]]>>>(args) becomes
# ld_emu_launch(kernel, "kernel", ld_emu_cfg(grid, block...))(args), the
# call tests/support/cuda_emu/cuda_emu.cuh defines, and each static __shared__
# declaration is followed by the calls that poison its variables at each
# block (emu_sched.h's ld_emu_shared_poison).  Newlines are kept and a
# #line names IN, so the compiler's and the sanitizers' positions are IN's.
use strict;
use warnings;

my ($in, $out) = @ARGV;
die "usage: launches.pl IN.cu OUT.cc\n" unless defined $out;
open(my $fh, '<', $in) or die "launches.pl: $in: $!\n";
my $src = do { local $/; <$fh> };
close $fh;

# a kernel name, its template arguments if any (no nesting in our sources)
my $n = ($src =~ s{\b([A-Za-z_]\w*(?:<[^<>;()]*>)?)<<<(.*?)>>>\(}{ld_emu_launch($1, "$1", ld_emu_cfg($2))(}gs);
my $left = () = $src =~ /<<<|>>>/g;
die "launches.pl: $in: $left launch brackets left after $n launches\n" if $left;

# each static __shared__ declaration in a function body (indented, on one
# line) poisons its variables at each block: ld_emu_shared_poison(&v,
# sizeof v) after it, on the same line
sub poison_calls {
    my ($decl) = @_;
    my ($depth, $cur, @parts) = (0, '');
    for my $c (split //, $decl) { # the declarators: commas outside brackets
        $depth++ if $c =~ /[\[(]/;
        $depth-- if $c =~ /[\])]/;
        if ($c eq ',' && !$depth) { push @parts, $cur; $cur = ''; } else { $cur .= $c; }
    }
    push @parts, $cur;
    my $calls = '';
    for my $p (@parts) {
        $p =~ /(\w+)\s*(?:\[[^\]]*\]\s*)*$/ or die "launches.pl: $in: no name in __shared__ declarator '$p'\n";
        $calls .= " ld_emu_shared_poison(&$1, sizeof $1);";
    }
    return $calls;
}
my $shared = ($src =~ s{^([ \t]+__shared__\s+([^;{}]*);)}{$1 . poison_calls($2)}gme);

open(my $oh, '>', $out) or die "launches.pl: $out: $!\n";
print $oh "#line 1 \"$in\"\n", $src;
close $oh or die "launches.pl: $out: $!\n";

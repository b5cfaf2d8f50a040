#!/usr/bin/perl
# launches.pl IN.cu OUT.cc - kernels/*.cu for a host C++ compiler: each
# launch kernel<<<grid, block[, smem[, stream]]>>>(args) becomes
# ld_emu_launch(kernel, "kernel", ld_emu_cfg(grid, block...))(args), the
# call tests/cuda_emu/cuda_emu.cuh defines.  Newlines are kept and a #line
# names IN, so the compiler's and the sanitizers' positions are IN's.
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

open(my $oh, '>', $out) or die "launches.pl: $out: $!\n";
print $oh "#line 1 \"$in\"\n", $src;
close $oh or die "launches.pl: $out: $!\n";

" TXCL rule files
autocmd BufRead,BufNewFile *.txcl setfiletype txcl

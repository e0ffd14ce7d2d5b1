//! Runs the converter natively, for development: `convert SOURCE TARGET INPUT OUTPUT [k=v…]`.
//! Prints the report's finding codes and counts.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: convert SOURCE TARGET INPUT OUTPUT [key=value…]");
        std::process::exit(2);
    }
    let options: Vec<(String, String)> = args[4..]
        .iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let out = std::path::Path::new(&args[3]);
    let _ = std::fs::create_dir_all(out);
    let job = convert_kit::Job {
        source: &args[0],
        target: &args[1],
        options: &options,
        input: args[2].as_ref(),
        output: out,
    };
    match converter_claude::convert(&job) {
        Ok(report) => {
            for (list, findings) in [
                ("lost", &report.lost),
                ("synthesised", &report.synthesised),
                ("normalised", &report.normalised),
                ("reinterpreted", &report.reinterpreted),
            ] {
                for f in findings {
                    println!("{list}:{} {} [{}] {}", f.code, f.path, f.field, f.message);
                }
            }
        }
        Err(e) => {
            println!("ERROR {e}");
            std::process::exit(1);
        }
    }
}
